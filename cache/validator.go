package cache

import (
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"
)

// Validator is what the origin said identifies the version of an object whose blocks a
// FileKey holds: its ETag, or, from an origin without ETags, its modification time. The
// caller records it beside the blocks (SetValidator) so that after a restart it can tell
// whether the blocks belong to the origin's current object without fetching one.
type Validator struct {
	ETag    string    // the entity tag as the origin sent it, quotes and W/ included; "" if none
	ModTime time.Time // the origin's modification time; zero if none
}

// IsZero reports whether v holds neither an ETag nor a time.
func (v Validator) IsZero() bool { return v.ETag == "" && v.ModTime.IsZero() }

// The meta file holds a key's Validator, checksummed so that a torn write is detected
// rather than read as a shorter ETag:
//
//	meta2 <CRC-32C of what follows this line, 8 hex digits>\n
//	mtime <unix seconds>.<nanoseconds, 9 digits>\n   when ModTime is set
//	etag <ETag>                                      when ETag is set; runs to the end of
//	                                                 the file, as an ETag may hold any byte
//
// Each field is written in one canonical form, and a file is read only if it is in that
// form, so a file that decodes is exactly the encoding of what it decodes to.
//
// A file without the metaMagic line is of the first format, still read (a cache is
// upgraded in place, not wiped) but never written: "<CRC-32C, 8 hex digits>\n<payload>",
// where the payload was the ETag or, from an origin without ETags, the pseudo-ETag
// "mtime <unix seconds>". An ETag starts with a quote or W/, so the two cannot be
// confused; a first-format header is hex digits, so it cannot be taken for metaMagic.
const (
	metaMagic      = "meta2 "
	metaTimeField  = "mtime "
	metaETagField  = "etag "
	metaSumDigits  = 8 // hex digits of a CRC-32C
	metaNanoDigits = 9 // digits of a time's nanoseconds
)

func encodeMeta(v Validator) []byte {
	body := metaBody(v)
	return fmt.Appendf(nil, "%s%0*x\n%s", metaMagic, metaSumDigits, crc32.Checksum([]byte(body), castagnoli), body)
}

func metaBody(v Validator) string {
	var b strings.Builder
	if !v.ModTime.IsZero() {
		fmt.Fprintf(&b, "%s%d.%0*d\n", metaTimeField, v.ModTime.Unix(), metaNanoDigits, v.ModTime.Nanosecond())
	}
	if v.ETag != "" {
		b.WriteString(metaETagField + v.ETag)
	}
	return b.String()
}

// decodeMeta reads a meta file of either format.
func decodeMeta(b []byte) (Validator, error) {
	s, current := strings.CutPrefix(string(b), metaMagic)
	sum, body, ok := strings.Cut(s, "\n")
	want, err := strconv.ParseUint(sum, 16, 32)
	if !ok || err != nil || len(sum) != metaSumDigits || uint32(want) != crc32.Checksum([]byte(body), castagnoli) {
		return Validator{}, fmt.Errorf("%w: meta file", errCorrupt)
	}
	if !current {
		return firstFormatValidator(body), nil
	}
	v, ok := parseMetaBody(body)
	if !ok || metaBody(v) != body {
		return Validator{}, fmt.Errorf("%w: meta file fields", errCorrupt)
	}
	return v, nil
}

// parseMetaBody reads the fields of body; the caller checks that they are in canonical
// form.
func parseMetaBody(body string) (Validator, bool) {
	var v Validator
	if rest, ok := strings.CutPrefix(body, metaTimeField); ok {
		stamp, after, ok := strings.Cut(rest, "\n")
		secs, nanos, dot := strings.Cut(stamp, ".")
		sec, err1 := strconv.ParseInt(secs, 10, 64)
		nsec, err2 := strconv.ParseInt(nanos, 10, 64)
		if !ok || !dot || err1 != nil || err2 != nil {
			return v, false
		}
		v.ModTime = time.Unix(sec, nsec).UTC()
		body = after
	}
	if body == "" {
		return v, true
	}
	etag, ok := strings.CutPrefix(body, metaETagField)
	v.ETag = etag
	return v, ok
}

// firstFormatValidator reads the payload of a first-format meta file: a time in the form
// that format wrote it, else an ETag.
func firstFormatValidator(payload string) Validator {
	if s, ok := strings.CutPrefix(payload, metaTimeField); ok {
		if sec, err := strconv.ParseInt(s, 10, 64); err == nil && strconv.FormatInt(sec, 10) == s {
			return Validator{ModTime: time.Unix(sec, 0).UTC()}
		}
	}
	return Validator{ETag: payload}
}
