package cache

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
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
		if _, ok := c.Get(context.Background(), keyA, i%n, dst); !ok {
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
			if _, ok := c.Get(context.Background(), keyA, i%n, dst); !ok {
				b.Error("miss")
				return
			}
			i++
		}
	})
}

// putCache is an empty cache for the Put benchmarks. MaxBytes of 256 MiB: after the
// first 1024 blocks every Put also evicts one, the steady state of a full cache.
func putCache(b *testing.B) *Cache {
	c, err := Open(Options{Dir: b.TempDir(), BlockSize: DefaultBlockSize, MaxBytes: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// cpuTime is the CPU time (user and system, all threads) this process has used: the
// cost that matters for Put, which competes with the reader for the cores.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkPut(b *testing.B) {
	c := putCache(b)
	data := blockOf(c, keyA, 0, DefaultBlockSize)
	b.SetBytes(DefaultBlockSize)
	b.ReportAllocs()
	var i int64
	cpu := cpuTime(b)
	for b.Loop() {
		if err := c.Put(keyA, i, data); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}

// BenchmarkPutParallel stores blocks of two files from two goroutines, as the fetcher's
// two cache writers do.
func BenchmarkPutParallel(b *testing.B) {
	c := putCache(b)
	b.SetBytes(DefaultBlockSize)
	b.ReportAllocs()
	var next atomic.Int64
	cpu := cpuTime(b)
	b.SetParallelism(1) // GOMAXPROCS goroutines: 2 on this machine
	b.RunParallel(func(pb *testing.PB) {
		key := keyA
		if next.Add(1)%2 == 0 {
			key = keyB
		}
		data := blockOf(c, key, 0, DefaultBlockSize)
		var i int64
		for pb.Next() {
			if err := c.Put(key, i, data); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
	b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
}

// BenchmarkOpenScan opens a cache of 80k blocks (20 GiB of 256 KiB blocks) in 320 files
// of 256 blocks: the restart scan. The data files are sparse (the scan reads no data).
func BenchmarkOpenScan(b *testing.B) {
	const files, perFile = 320, 256
	o := Options{Dir: b.TempDir(), BlockSize: DefaultBlockSize, MaxBytes: 1 << 40}
	c, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	index := make([]byte, perFile*recLen)
	for i := range files {
		k := FileKey{Source: "http://origin.test/", Path: fmt.Sprintf("films/%d.mkv", i), Version: "1-1"}
		sum := k.sum()
		fe := c.fileFor(k, sum)
		fe.mu.Lock()
		if err := c.ensureDir(fe); err != nil {
			b.Fatal(err)
		}
		fe.mu.Unlock()
		for n := range int64(perFile) {
			r := record{block: uint64(n), blockSize: DefaultBlockSize, dataLen: DefaultBlockSize, stamp: uint32(n)}
			copy(r.keyID[:], sum[:])
			r.encode(index[n*recLen:])
		}
		if err := os.WriteFile(filepath.Join(fe.dir, indexName), index, filePerm); err != nil {
			b.Fatal(err)
		}
		f, err := os.Create(filepath.Join(fe.dir, dataName))
		if err != nil {
			b.Fatal(err)
		}
		f.Truncate(perFile * DefaultBlockSize)
		f.Close()
	}
	c.Close()
	for b.Loop() {
		c, err := Open(o)
		if err != nil {
			b.Fatal(err)
		}
		if s := c.Stats(); s.Blocks != files*perFile {
			b.Fatalf("scan found %d blocks, want %d", s.Blocks, files*perFile)
		}
		c.Close()
	}
}
