package cache

import (
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Every kind of validator survives a restart exactly, the time to the nanosecond.
func TestValidatorSurvivesRestart(t *testing.T) {
	when := time.Date(2024, 11, 24, 11, 54, 7, 123456789, time.UTC)
	for _, v := range []Validator{
		{ETag: `"5f3a-1b2c"`},
		{ETag: `W/"weak"`},
		{ModTime: when},
		{ModTime: time.Unix(-1, 5)}, // before 1970: negative seconds, positive nanoseconds
		{ETag: `"both"`, ModTime: when},
		{ETag: "not\nan etag: mtime 5\n"}, // any bytes, whatever they look like
		{},
	} {
		t.Run(fmt.Sprintf("%+v", v), func(t *testing.T) {
			o := testOptions(t)
			c := openT(t, o)
			put(t, c, keyA, 0, testBS) // so that the directory outlives the restart
			if err := c.SetValidator(keyA, v); err != nil {
				t.Fatal(err)
			}
			c.Close()
			c = openT(t, o)
			got, ok := c.Validator(keyA)
			if !ok || !sameValidator(got, v) {
				t.Fatalf("Validator after restart = %+v %v, want %+v", got, ok, v)
			}
		})
	}
}

// A cache written before the validator was typed is read in place: its meta files (in
// testdata/meta-v1, written by that version's code) give the ETag, or the time it
// recorded for an origin without ETags.
func TestFirstFormatMetaFilesRead(t *testing.T) {
	for file, want := range map[string]Validator{
		"strong-etag": {ETag: `"5f3a-1b2c"`},
		"weak-etag":   {ETag: `W/"5f3a-1b2c"`},
		"mtime":       {ModTime: time.Date(2024, 11, 24, 11, 54, 7, 0, time.UTC)},
	} {
		t.Run(file, func(t *testing.T) {
			old, err := os.ReadFile(filepath.Join("testdata", "meta-v1", file))
			if err != nil {
				t.Fatal(err)
			}
			o := testOptions(t)
			c := openT(t, o)
			put(t, c, keyA, 0, testBS)
			c.Close()
			if err := os.WriteFile(filepath.Join(fileDir(c, keyA), metaName), old, 0o600); err != nil {
				t.Fatal(err)
			}
			c = openT(t, o)
			got, ok := c.Validator(keyA)
			if !ok || !sameValidator(got, want) {
				t.Fatalf("Validator from a first-format meta file = %+v %v, want %+v", got, ok, want)
			}
			wantHit(t, c, keyA, 0, testBS)
		})
	}
}

// A time in a first-format meta file reads back as the same instant, and no ETag reads
// as a time, not even one that says "mtime" inside its quotes or is not a number.
func TestFirstFormatTimeOrETag(t *testing.T) {
	tm := Validator{ModTime: time.Date(2025, 6, 1, 12, 0, 7, 0, time.UTC)}
	if got, err := decodeMeta(encodeFirstFormatMeta(tm)); err != nil || !sameValidator(got, tm) {
		t.Fatalf("first-format time %+v reads as %+v, %v", tm, got, err)
	}
	for _, etag := range []string{`"abc"`, `W/"mtime 5"`, `"mtime 5"`, "mtime x"} {
		want := Validator{ETag: etag}
		if got, err := decodeMeta(encodeFirstFormatMeta(want)); err != nil || got != want {
			t.Errorf("first-format ETag %q reads as %+v, %v", etag, got, err)
		}
	}
}

func sameValidator(a, b Validator) bool {
	return a.ETag == b.ETag && a.ModTime.Equal(b.ModTime)
}

// encodeFirstFormatMeta is a meta file as the first format wrote it (validator.go).
func encodeFirstFormatMeta(v Validator) []byte {
	payload := v.ETag
	if !v.ModTime.IsZero() {
		payload = metaTimeField + strconv.FormatInt(v.ModTime.Unix(), 10)
	}
	return fmt.Appendf(nil, "%08x\n%s", crc32.Checksum([]byte(payload), castagnoli), payload)
}
