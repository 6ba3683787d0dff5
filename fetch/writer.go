package fetch

// Cache writes happen off the fetch path. A stream hands each block to its readers first
// and queues it for the cache; a small pool of writers lands it on disk. A disk slower
// than the origin (this kind of machine writes about 300 MB/s, loopback origins deliver
// several times that) must not slow reads, so when the queue is full a block is served
// and not cached rather than holding the stream back.

const (
	// writeQueueBlocks bounds the memory held by blocks waiting for the cache disk: 64
	// blocks of 256 KiB is 16 MiB, a fraction of the RAM budget of a mount.
	writeQueueBlocks = 64
	// maxWriters: two writers keep one core writing while the other serves reads.
	maxWriters = 2
)

type writeJob struct {
	fl *File
	b  int64
	p  *pending
}

// queueWrite queues block b of fl (landed in p) for the cache, or drops it from the
// pending map at once when the queue is full.
func (f *Fetcher) queueWrite(fl *File, b int64, p *pending) {
	f.wmu.Lock()
	if f.closed || len(f.writes) >= writeQueueBlocks {
		closed := f.closed
		f.wmu.Unlock()
		if !closed {
			f.stats.cacheSkipped.Add(1)
		}
		fl.landed(b, p)
		return
	}
	f.writes = append(f.writes, writeJob{fl, b, p})
	if f.writers < maxWriters {
		f.writers++
		go f.writeLoop()
	}
	f.wmu.Unlock()
}

// writeLoop writes queued blocks until the queue is empty, then exits.
func (f *Fetcher) writeLoop() {
	for {
		f.wmu.Lock()
		if len(f.writes) == 0 {
			f.writers--
			if f.writers == 0 {
				f.wdone.Broadcast()
			}
			f.wmu.Unlock()
			return
		}
		j := f.writes[0]
		f.writes[0] = writeJob{}
		f.writes = f.writes[1:]
		f.wmu.Unlock()

		if !j.fl.isFailed() { // a changed object's old bytes must not land under its key
			if err := f.store.Put(j.fl.key, j.b, j.p.data); err != nil {
				f.stats.cacheWriteErr.Add(1)
				f.log.Debug("cache write failed; block served from memory only", "path", j.fl.path, "block", j.b, "err", err)
			}
		}
		j.fl.landed(j.b, j.p)
	}
}

// landed removes the pending entry of a block once it is in the cache (or will not be).
func (fl *File) landed(b int64, p *pending) {
	fl.mu.Lock()
	if fl.pending[b] == p {
		delete(fl.pending, b)
	}
	fl.mu.Unlock()
}
