package httpsrc

import (
	"fmt"
	"strconv"
	"strings"
)

// parseContentRange parses a Content-Range header (RFC 9110 §14.4) in one of its forms:
//
//	bytes first-last/total   a 206 answer
//	bytes first-last/*       a 206 answer of an object of unknown size: total is -1
//	bytes */total            a 416 answer: first and last are -1
//
// It checks first <= last < total (when known), so a caller can trust the numbers.
func parseContentRange(s string) (first, last, total int64, err error) {
	bad := func(why string) (int64, int64, int64, error) {
		return 0, 0, 0, fmt.Errorf("bad Content-Range %q: %s", s, why)
	}
	unit, spec, ok := strings.Cut(strings.TrimSpace(s), " ")
	if !ok || !strings.EqualFold(unit, "bytes") {
		return bad("not a byte range")
	}
	rng, size, ok := strings.Cut(strings.TrimLeft(spec, " "), "/")
	if !ok {
		return bad("no '/'")
	}
	total = -1
	if size != "*" {
		if total, ok = parseNonNeg(size); !ok {
			return bad("bad total")
		}
	}
	if rng == "*" {
		if total < 0 {
			return bad("neither range nor total")
		}
		return -1, -1, total, nil
	}
	a, b, ok := strings.Cut(rng, "-")
	if !ok {
		return bad("no '-'")
	}
	if first, ok = parseNonNeg(a); !ok {
		return bad("bad first byte")
	}
	if last, ok = parseNonNeg(b); !ok {
		return bad("bad last byte")
	}
	if last < first {
		return bad("last byte before first")
	}
	if total >= 0 && last >= total {
		return bad("last byte past the total")
	}
	return first, last, total, nil
}

// parseNonNeg parses a decimal of ASCII digits only (no sign, no space), as HTTP numbers
// are written; strconv.ParseInt alone would accept "+5".
func parseNonNeg(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
