package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/metrics"
	"github.com/playhead/playhead/source/memsrc"
	"github.com/playhead/playhead/vfs"
)

// metricValue gathers reg and returns the value of the playhead metric name.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not exposed", name)
	return 0
}

// A cache block damaged on disk shows in the mount's metrics: a read finds it corrupt
// (playhead_cache_corrupt_blocks_total), and damage the startup scan removes shows in
// playhead_cache_scan_removed.
func TestMetricsShowCacheCorruption(t *testing.T) {
	const size, bs = 8 * 64 << 10, 64 << 10
	mem := memsrc.New()
	mem.AddPattern("a.bin", 5, size)
	opts := vfs.DefaultOptions()
	opts.Cache.Dir = t.TempDir()
	opts.Cache.BlockSize = bs
	opts.Cache.MaxBytes = 16 * bs
	opts.ReadAhead.MaxWindow = 0
	readAll := func(fsys *vfs.FS) {
		f, err := fsys.Open(context.Background(), "a.bin")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.ReadAt(make([]byte, size), 0); err != nil {
			t.Fatal(err)
		}
	}
	fsys, err := vfs.New(mem, opts)
	if err != nil {
		t.Fatal(err)
	}
	readAll(fsys)
	fsys.Close()
	data, _ := filepath.Glob(filepath.Join(opts.Cache.Dir, "v2", "*", "*", "data"))
	index, _ := filepath.Glob(filepath.Join(opts.Cache.Dir, "v2", "*", "*", "index"))
	if len(data) != 1 || len(index) != 1 {
		t.Fatalf("cache files: %v %v", data, index)
	}
	flip := func(path string, off int64) {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b := make([]byte, 1)
		f.ReadAt(b, off)
		b[0] ^= 1
		f.WriteAt(b, off)
	}
	flip(data[0], 2*bs+10) // found by the read of block 2
	flip(index[0], 5*64+8) // found by the scan: block 5's record
	fsys, err = vfs.New(mem, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	readAll(fsys)
	met := metrics.New("mem")
	met.Watch(fsys)
	reg := met.Registry()
	if v := metricValue(t, reg, "playhead_cache_corrupt_blocks_total"); v != 1 {
		t.Errorf("playhead_cache_corrupt_blocks_total = %v, want 1", v)
	}
	if v := metricValue(t, reg, "playhead_cache_scan_removed"); v != 1 {
		t.Errorf("playhead_cache_scan_removed = %v, want 1", v)
	}
	figure(t, "playhead_cache_corrupt_blocks_total %v, playhead_cache_scan_removed %v after one flipped data byte and one flipped index byte",
		metricValue(t, reg, "playhead_cache_corrupt_blocks_total"), metricValue(t, reg, "playhead_cache_scan_removed"))
}
