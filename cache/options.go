package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
)

const (
	// DefaultBlockSize is large enough that per-block costs (two syscalls, a record, an
	// index entry) are noise against the copy, and small enough that a seek wastes little.
	DefaultBlockSize = 256 << 10
	// DefaultMaxBytes fits a few films on a laptop disk.
	DefaultMaxBytes = 20 << 30

	// minBlockSize keeps the record a small fraction of a block, and is the page size
	// that hole punching frees in whole units.
	minBlockSize = 4 << 10
	// maxBlockSize: records store lengths as uint32, and larger blocks would make a
	// single miss fetch too much.
	maxBlockSize = 64 << 20
	// minLimitBlocks is the smallest limit, in blocks, the cache works with: the block
	// being Put must never be its own eviction victim, and a reader and its read-ahead
	// need a few blocks to make progress.
	minLimitBlocks = 4
)

// Options configure a Cache.
type Options struct {
	// Dir is the root directory; created (0700) if missing. Required.
	Dir string
	// MaxBytes is the limit, in bytes of block data, that eviction keeps the cache under.
	// 0 means DefaultMaxBytes (20 GiB). Must be >= 4*BlockSize.
	MaxBytes int64
	// BlockSize is the number of bytes per block: every block but the last of a file has
	// exactly this size. 0 means DefaultBlockSize (256 KiB); allowed 4 KiB to 64 MiB. A
	// multiple of 4 KiB lets eviction free a block's disk space exactly.
	// Changing it on an existing Dir wipes the cache (blocks of another size are useless).
	BlockSize int64
	// BufferedIO moves all block data through the page cache, PutSumDirect's too. By
	// default PutSumDirect's blocks go to and from the disk directly (O_DIRECT) where the
	// file system allows (directio.go).
	BufferedIO bool
	// Logger receives the notable events: a corrupt block or a failed clean-up (Warn), a
	// fallback from direct I/O or the removal of an old tree (Info), the startup scan's
	// summary and each repair it makes (Debug: a mount's normal start says nothing).
	// nil means slog.Default().
	Logger *slog.Logger
}

// DefaultOptions returns the defaults; Dir must still be set.
func DefaultOptions() Options {
	return Options{MaxBytes: DefaultMaxBytes, BlockSize: DefaultBlockSize}
}

func (o Options) withDefaults() Options {
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.BlockSize == 0 {
		o.BlockSize = DefaultBlockSize
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Validate reports the first problem with o (zero fields count as their defaults).
func (o Options) Validate() error {
	o = o.withDefaults()
	switch {
	case o.Dir == "":
		return errors.New("cache: Options.Dir is empty")
	case o.BlockSize < minBlockSize || o.BlockSize > maxBlockSize:
		return fmt.Errorf("cache: Options.BlockSize %d is outside [%d, %d]", o.BlockSize, minBlockSize, maxBlockSize)
	case o.MaxBytes < minLimitBlocks*o.BlockSize:
		return fmt.Errorf("cache: Options.MaxBytes %d is less than %d blocks of %d bytes", o.MaxBytes, minLimitBlocks, o.BlockSize)
	}
	return nil
}

// FileKey names one version of one remote file. Blocks of different keys never mix,
// so a remote file that changes size or mtime starts a fresh entry.
type FileKey struct {
	Source  string // the source's String(), e.g. the base URL
	Path    string // slash-separated path within the source
	Version string // source.Version.CacheKey()
}

func (k FileKey) String() string {
	return fmt.Sprintf("%s:%q@%s", k.Source, k.Path, k.Version)
}

// sum is the SHA-256 of an unambiguous encoding of k (each field length-prefixed), which
// names the key's directory; its first 8 bytes go into every index record.
func (k FileKey) sum() [sha256.Size]byte {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, s := range [...]string{k.Source, k.Path, k.Version} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write([]byte(s))
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}
