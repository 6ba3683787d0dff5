// Package cache is playhead's on-disk block cache: fixed-size blocks of remote files,
// kept in one sparse data file per remote file version with an index of checksummed
// records beside it, bounded by a byte limit with least-recently-used eviction, and
// rebuilt from the directory tree on restart.
//
// # Layout
//
//	Dir/v2/format              format version and block size; a mismatch wipes v2/
//	Dir/v2/lock                flock'ed while a Cache is open (one process per dir)
//	Dir/v2/tmp/                temp files and doomed directories; emptied on Open
//	Dir/v2/<xx>/<sha256 hex>/  one directory per FileKey; xx = first hash byte (256 fan-out
//	                           dirs, made on first use, never removed)
//	    key                    the FileKey as JSON (debugging, and checked on Open)
//	    meta                   the origin's validator (ETag or time), with a CRC-32C (validator.go)
//	    data                   sparse: block b at offset b*BlockSize, holes elsewhere
//	    index                  sparse: the 64-byte record of block b at offset b*64
//
// Dir/v1, the one-file-per-block tree of format 1, is deleted by Open (it is a cache).
//
// A record (little endian) is: magic "PHIX", format version (uint16), record length
// (uint16), the first 8 bytes of the key's SHA-256, block index (uint64), the cache's
// block size (uint32), data length (uint32), CRC-32C of the data (uint32), last-use
// stamp in unix seconds (uint32), 20 spare zero bytes, and CRC-32C of the 60 bytes
// before it (uint32). An all-zero record means "no block". Get preads the record and the
// data and checks every field and the data CRC, so a flipped bit, a truncated file, a
// record or data range moved to another slot or another key's files, or a file written
// with another block size is a miss, never wrong bytes.
//
// Why one data file per remote file rather than one file per block: a cold read stores
// a block every 300 µs or so, and with a file per block each one cost an open(O_CREAT)
// and a rename, the two largest items in the daemon's CPU profile. Now a Put is two
// pwrites on descriptors an fd cache keeps open (fdcache.go), and a Get two preads. The
// price is paid in rarer places: eviction must zero a record and punch a hole instead of
// unlinking a file; the index and the data can disagree after a crash, so every read
// checks one against the other (it did already); a key directory whose data or index
// file goes missing loses all its blocks at once; and long-lived descriptors must be
// kept coherent with directories being dropped (reference counts, see fdCache).
//
// Blocks from a fast origin can move with direct I/O (PutSumDirect), so the cache keeps
// no second copy of what the mount's page cache already holds (directio.go).
//
// # Crash safety
//
// Put writes the data, then the record: the record is what makes a block visible. A
// kill -9 between the two leaves data without a record, so a miss (a replaced block's
// old record is zeroed before its data is overwritten, so it cannot vouch for a mix of
// old and new bytes). A failed write (ENOSPC, EIO) is handled the same way at once: no
// record, and the range punched back to a hole. Eviction zeroes the record first, then
// punches the data. Open punches data that no sound record covers (what a crash between
// the steps leaves, which the byte count would otherwise never see) and zeroes records
// that fail their checks. The key and meta files are written to a temp file in v2/tmp and renamed
// into place; directories are removed by first renaming them into v2/tmp, so a
// half-removed directory is never scanned.
//
// Nothing is fsynced: after a power loss a record may reach the disk before its data
// (or a punched hole before the zeroed record), and the data CRC turns that into a
// miss. Losing cache contents is cheap; an fsync per block is not, and two per block
// (data before record, to order them) would halve what the disk can take.
//
// # Concurrency
//
// Lock order: fileEntry.mu, then Cache.mu, then fdCache.mu; never two fileEntry.mu at
// once.
//
// Cache.mu guards the in-memory index and the LRU list and is never held across file
// I/O: Get looks up the block under it, takes a reference to the open files, then
// preads and checksums without any lock, so Gets run in parallel. Each fileEntry.mu
// serialises writes to one FileKey's files (a block's data and record, retiring a block,
// a stamp refresh, key/meta, removing the directory), so eviction, corruption handling
// and Put of the same block cannot retire a block another goroutine has just stored.
// Puts of one file therefore write one at a time, which costs nothing on ext4, where
// buffered writes to one inode are serialised anyway. A Get that fails because its block
// was evicted or replaced meanwhile is an ordinary miss, not a corruption: the failure
// is only blamed on the block if the index still holds the same entry and generation
// (checked under fileEntry.mu, so after any Put in progress has finished).
//
// # Traps
//
//   - The index counts block data only. The disk also holds 64 bytes of record per
//     block, the key directory, and file-system block rounding (a BlockSize that is not
//     a multiple of 4 KiB frees only the whole pages of an evicted block), so leave some
//     room beyond MaxBytes. On a file system without hole punching, an evicted block's
//     space comes back only when its file's last block goes.
//   - After ENOSPC or EDQUOT (the disk is shared and fuller than MaxBytes assumed), Put
//     punches out what it wrote, lowers an effective limit to a little below the bytes
//     it holds, evicts down to it, and retries the write once. The limit stays lowered
//     for fullRecovery, then returns to MaxBytes; if the disk is still full the next
//     ENOSPC lowers it again. That bounds the evict-and-fail churn on a full disk to one
//     episode per fullRecovery.
//   - At startup LRU order comes from the records' last-use stamps. Get rewrites a
//     block's record with a new stamp at most once per touchInterval, so restart order
//     follows use, not only write time, without a write on every read.
//   - When eviction removes the last block of a file, its directory and validator (meta) go
//     too. A Put racing with Forget of the same key is dropped (returns nil): its bytes
//     may belong to the version that was just forgotten.
//   - Files are kept open: damage done to them behind the cache's back (a deleted or
//     replaced index or data file) shows only once the fd cache reopens them. A missing
//     or non-regular data or index file drops the whole key directory; its blocks count
//     as corrupt.
package cache
