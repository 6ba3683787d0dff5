package cache

import (
	"testing"
)

// benchCache fills a cache with 64 blocks (16 MiB) of 256 KiB: small enough to stay in
// the page cache, as the hot blocks of a cache do.
func benchCache(b *testing.B) (*Cache, int64) {
	const nblocks = 64
	c, err := Open(Options{Dir: b.TempDir(), BlockSize: DefaultBlockSize, MaxBytes: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	for i := int64(0); i < nblocks; i++ {
		if err := c.Put(keyA, i, blockOf(c, keyA, i, DefaultBlockSize)); err != nil {
			b.Fatal(err)
		}
	}
	return c, nblocks
}

func BenchmarkGet(b *testing.B) {
	c, n := benchCache(b)
	dst := make([]byte, DefaultBlockSize)
	b.SetBytes(DefaultBlockSize)
	b.ReportAllocs()
	var i int64
	for b.Loop() {
		if _, ok := c.Get(keyA, i%n, dst); !ok {
			b.Fatal("miss")
		}
		i++
	}
}

func BenchmarkGetParallel(b *testing.B) {
	c, n := benchCache(b)
	b.SetBytes(DefaultBlockSize)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		dst := make([]byte, DefaultBlockSize)
		var i int64
		for pb.Next() {
			if _, ok := c.Get(keyA, i%n, dst); !ok {
				b.Error("miss")
				return
			}
			i++
		}
	})
}

func BenchmarkPut(b *testing.B) {
	c, err := Open(Options{Dir: b.TempDir(), BlockSize: DefaultBlockSize, MaxBytes: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	data := blockOf(c, keyA, 0, DefaultBlockSize)
	b.SetBytes(DefaultBlockSize)
	var i int64
	for b.Loop() {
		if err := c.Put(keyA, i, data); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
