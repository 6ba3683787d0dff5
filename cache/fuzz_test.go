package cache

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"
)

// Fuzzers of the on-disk index format. Seeds are in testdata/fuzz (written from a real
// cache, see fuzzIndexSeeds); run one with
//
//	go test ./cache/ -run '^$' -fuzz FuzzIndexFile -fuzztime 5m -fuzzminimizetime 1s
//
// (FuzzIndexFile opens a cache per input, a few ms; early on most of its time goes to
// minimising new inputs, hence the short -fuzzminimizetime.)

// A record that decodes is re-encoded to a record that decodes to the same fields, and
// no single flipped bit of a record that decodes still decodes: CRC-32C catches every
// one-bit error, so a record damaged in one bit is a miss, never a block vouched for.
func FuzzDecodeRecord(f *testing.F) {
	for _, s := range fuzzRecordSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRecord(b)
		if err != nil {
			return
		}
		var again [recLen]byte
		r.encode(again[:])
		r2, err := decodeRecord(again[:])
		if err != nil || r2 != r {
			t.Fatalf("re-encoded record %+v decodes to %+v, %v", r, r2, err)
		}
		rb := append([]byte(nil), b[:recLen]...)
		for bit := range recLen * 8 {
			rb[bit/8] ^= 1 << (bit % 8)
			if _, err := decodeRecord(rb); err == nil {
				t.Fatalf("record with bit %d flipped still decodes", bit)
			}
			rb[bit/8] ^= 1 << (bit % 8)
		}
	})
}

// A meta file that decodes is the encoding of the validator it gives, in its own format
// (the first format's, or the current one's), up to the case of the checksum's hex
// digits: nothing else (a torn or extended file) is read as a validator. What decodes
// also encodes in the current format to itself.
func FuzzDecodeMeta(f *testing.F) {
	for _, s := range []string{"", `"abc"`, `W/"weak"`, "line\nbreak"} {
		f.Add(encodeMeta(Validator{ETag: s}))
		f.Add(encodeFirstFormatMeta(Validator{ETag: s}))
	}
	when := time.Date(2024, 11, 24, 11, 54, 7, 123456789, time.UTC)
	f.Add(encodeMeta(Validator{ModTime: when}))
	f.Add(encodeMeta(Validator{ETag: `"abc"`, ModTime: when}))
	f.Add(encodeFirstFormatMeta(Validator{ModTime: when}))
	f.Add([]byte("00000000\n"))
	f.Add([]byte("zzzzzzzz\nx"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := decodeMeta(b)
		if err != nil {
			return
		}
		want := encodeMeta(v)
		if !bytes.HasPrefix(b, []byte(metaMagic)) {
			want = encodeFirstFormatMeta(v)
		}
		gotSum, gotBody, _ := bytes.Cut(b, []byte("\n"))
		wantSum, wantBody, _ := bytes.Cut(want, []byte("\n"))
		if !bytes.EqualFold(gotSum, wantSum) || !bytes.Equal(gotBody, wantBody) {
			t.Fatalf("meta %q decodes to %+v, whose encoding is %q", b, v, want)
		}
		if again, err := decodeMeta(encodeMeta(v)); err != nil || !sameValidator(again, v) {
			t.Fatalf("%+v encodes to %q, which decodes to %+v, %v", v, encodeMeta(v), again, err)
		}
	})
}

// fuzzBlocks is how many blocks FuzzIndexFile stores before it replaces the index.
const fuzzBlocks = 4

// An index file of any content, over a data file of sound blocks, never makes the cache
// serve wrong bytes, panic or fail to open: every Get is a miss or the pattern bytes of
// that very block, and the cache stays consistent with its files.
func FuzzIndexFile(f *testing.F) {
	for _, s := range fuzzIndexSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, index []byte) {
		if len(index) > 64*recLen {
			return // past the blocks there is no data to serve: nothing new to find
		}
		o := testOptions(t)
		c := openT(t, o)
		for b := int64(0); b < fuzzBlocks; b++ {
			put(t, c, keyA, b, testBS-int(b)) // lengths differ: a record moved is caught
		}
		c.Close()
		if err := os.WriteFile(indexFile(c, keyA), index, 0o600); err != nil {
			t.Fatal(err)
		}
		c = openT(t, o)
		dst := make([]byte, testBS)
		for b := int64(0); b < fuzzBlocks+2; b++ {
			n, ok := c.Get(context.Background(), keyA, b, dst)
			if !ok {
				continue
			}
			if want := blockOf(c, keyA, b, testBS-int(b)); b >= fuzzBlocks || string(dst[:n]) != string(want) {
				t.Fatalf("block %d: hit with %d wrong bytes", b, n)
			}
		}
		checkConsistent(t, c)
	})
}

// fuzzRecordSeeds are sound records and near misses.
func fuzzRecordSeeds() [][]byte {
	r := record{block: 3, blockSize: testBS, dataLen: testBS - 3, dataCRC: 0xdeadbeef, stamp: 1700000000}
	copy(r.keyID[:], "keyid!!!")
	sound := make([]byte, recLen)
	r.encode(sound)
	flipped := append([]byte(nil), sound...)
	flipped[recDataLen] ^= 1
	return [][]byte{sound, flipped, sound[:recLen-1], make([]byte, recLen)}
}

// fuzzIndexSeeds are index files written by a real cache, whole and damaged: the records
// of the key FuzzIndexFile stores, so mutations start from records that pass every check.
func fuzzIndexSeeds(f *testing.F) [][]byte {
	c, err := Open(Options{Dir: f.TempDir(), BlockSize: testBS, MaxBytes: 1 << 20})
	if err != nil {
		f.Fatal(err)
	}
	defer c.Close()
	for b := int64(0); b < fuzzBlocks; b++ {
		if err := c.Put(keyA, b, blockOf(c, keyA, b, testBS-int(b))); err != nil {
			f.Fatal(err)
		}
	}
	sound, err := os.ReadFile(indexFile(c, keyA))
	if err != nil {
		f.Fatal(err)
	}
	swapped := append([]byte(nil), sound...)
	copy(swapped[recLen:2*recLen], sound[2*recLen:3*recLen])
	copy(swapped[2*recLen:3*recLen], sound[recLen:2*recLen])
	shifted := append(make([]byte, recLen), sound...) // every record one slot late
	return [][]byte{sound, swapped, shifted, sound[:2*recLen+recLen/2], {}}
}
