// Package cache is playhead's on-disk block cache: fixed-size blocks of remote files,
// each in its own small file with a checksummed header, bounded by a byte limit with
// least-recently-used eviction, and rebuilt from the directory tree on restart.
//
// # Layout
//
//	Dir/v1/format              format version and block size; a mismatch wipes v1/
//	Dir/v1/lock                flock'ed while a Cache is open (one process per dir)
//	Dir/v1/tmp/                temp files and doomed directories; emptied on Open
//	Dir/v1/<xx>/<sha256 hex>/  one directory per FileKey; xx = first hash byte (256 fan-out
//	                           dirs, made on first use, never removed)
//	    key                    the FileKey as JSON (debugging, and checked on Open)
//	    meta                   the origin's ETag, with a CRC-32C
//	    <n>.blk                block n: 40-byte header, then the data
//
// The block header (little endian) is: magic "PHBK", format version (uint16), header
// length (uint16), the first 8 bytes of the key's SHA-256, block index (uint64), the
// cache's block size (uint32), data length (uint32), CRC-32C of the data (uint32), and
// CRC-32C of the 36 header bytes before it (uint32). Get checks every field and the data
// CRC, so a flipped bit, a truncated file, a block renamed to another index or moved to
// another file's directory, or a file written with another block size is a miss, never
// wrong bytes.
//
// Why one file per block rather than one sparse file per remote file plus an index log:
// the file system is the index, so a crash can never leave the index and the data out
// of step; eviction is an unlink that really returns space (no hole punching); and a
// torn block only loses that block. The price is an open and close per Get (a few µs
// against ~30 µs to copy and checksum 256 KiB) and an inode per block, both fine at the
// ~80k blocks of a 20 GiB cache. With no long-lived descriptors there is no fd cache to
// keep coherent with eviction.
//
// # Crash safety
//
// Blocks, key and meta files are written to a temp file in v1/tmp and renamed into
// place, so a kill -9 at any moment leaves either the old file, the new file or a
// stray temp file (removed by the next Open). Directories are removed by first renaming
// them into v1/tmp, so a half-removed directory is never scanned. Nothing is fsynced:
// after a power loss a renamed block may hold zeros or a prefix of its data, and the
// length and checksum checks turn that into a miss. Losing cache contents is cheap;
// an fsync per block is not.
//
// # Concurrency
//
// Lock order: fileEntry.mu, then Cache.mu; never two fileEntry.mu at once.
//
// Cache.mu guards the in-memory index and the LRU list and is never held across file
// I/O: Get looks up the block under it, then opens, preads and checksums without it, so
// Gets of different blocks run in parallel. Each fileEntry.mu serialises changes to one
// FileKey's directory (renaming a block in, unlinking one, writing key/meta, removing the
// directory), so eviction, corruption handling and Put of the same block cannot unlink a
// file that another goroutine has just installed. A Get that fails because its block was
// evicted or replaced meanwhile is an ordinary miss, not a corruption: the failure is
// only blamed on the file if the index still holds the same entry and generation.
//
// # Traps
//
//   - The index counts block data only. The disk also holds a 40-byte header per block,
//     file-system block rounding and inodes, so leave some room beyond MaxBytes.
//   - After ENOSPC or EDQUOT (the disk is shared and fuller than MaxBytes assumed), Put
//     lowers an effective limit to a little below the bytes it holds, evicts down to it,
//     and retries the write once. The limit stays lowered for fullRecovery, then returns
//     to MaxBytes; if the disk is still full the next ENOSPC lowers it again. That bounds
//     the evict-and-fail churn on a full disk to one episode per fullRecovery.
//   - At startup LRU order comes from block mtimes. Get refreshes a block's mtime at most
//     once per touchInterval, so restart order follows use, not only write time, without
//     a metadata write on every read.
//   - When eviction removes the last block of a file, its directory and ETag (meta) go
//     too. A Put racing with Forget of the same key is dropped (returns nil): its bytes
//     may belong to the version that was just forgotten.
//   - Get does two preads (header into dst, then data into dst) so the caller's buffer
//     need only hold BlockSize bytes and no scratch buffer is needed.
package cache
