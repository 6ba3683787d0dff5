// Package units parses and prints byte sizes and rates for flags and reports.
//
// Suffixes follow SI and IEC strictly, so a number means the same thing in every flag:
// K, M, G, T (with or without a trailing B) are powers of 1000; Ki, Mi, Gi, Ti (with or
// without B) are powers of 1024. So "64M" is 64,000,000 bytes and "64MiB" is 67,108,864.
// Suffixes are case-insensitive and there are no bits: "mb" is megabytes. A bare number is
// bytes. Fractions are allowed ("1.5GiB") and rounded to the nearest byte. Rates are a size
// followed by "/s" ("3MB/s"); the "/s" may be left out.
//
// Trap: tools disagree on "M" (dd and rclone read 64M as MiB). Print sizes with FormatBytes,
// which always says which one it means.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// multipliers maps a lower-cased suffix to its value in bytes.
var multipliers = map[string]float64{
	"": 1, "b": 1,
	"k": 1e3, "kb": 1e3, "ki": 1 << 10, "kib": 1 << 10,
	"m": 1e6, "mb": 1e6, "mi": 1 << 20, "mib": 1 << 20,
	"g": 1e9, "gb": 1e9, "gi": 1 << 30, "gib": 1 << 30,
	"t": 1e12, "tb": 1e12, "ti": 1 << 40, "tib": 1 << 40,
}

// ParseBytes parses a size such as "256KiB", "20MB", "1.5GiB", "64M" or "4096".
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r == '.' || r == '+' || r == '-')
	})
	num, suffix := t, ""
	if i >= 0 {
		num, suffix = t[:i], strings.TrimSpace(t[i:])
	}
	mult, ok := multipliers[strings.ToLower(suffix)]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown suffix %q (want B, K, KiB, M, MiB, G, GiB, T, TiB)", s, suffix)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("size %q: not a number", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("size %q is negative", s)
	}
	b := math.Round(v * mult)
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(b), nil
}

// ParseRate parses a rate in bytes per second such as "3MB/s" or "25MiB/s".
func ParseRate(s string) (int64, error) {
	t := strings.TrimSpace(s)
	lower := strings.ToLower(t)
	if strings.HasSuffix(lower, "/s") {
		t = t[:len(t)-2]
	}
	b, err := ParseBytes(t)
	if err != nil {
		return 0, fmt.Errorf("rate %q: %w", s, err)
	}
	return b, nil
}

// FormatBytes prints n with an IEC suffix ("1.5 GiB", "256 KiB", "100 B").
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	for _, suffix := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v /= unit
		if math.Abs(v) < unit || suffix == "TiB" {
			return strconv.FormatFloat(v, 'f', precision(v), 64) + " " + suffix
		}
	}
	panic("unreachable")
}

// FormatRate prints a rate in bytes per second with an SI suffix ("3.00 MB/s"), the unit
// links and bitrates are quoted in.
func FormatRate(bytesPerSecond float64) string {
	v := bytesPerSecond
	for _, suffix := range []string{"B/s", "kB/s", "MB/s", "GB/s"} {
		if math.Abs(v) < 1000 || suffix == "GB/s" {
			return strconv.FormatFloat(v, 'f', precision(v), 64) + " " + suffix
		}
		v /= 1000
	}
	panic("unreachable")
}

// precision keeps about three significant digits.
func precision(v float64) int {
	switch v = math.Abs(v); {
	case v >= 100:
		return 0
	case v >= 10:
		return 1
	default:
		return 2
	}
}
