package cache

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
)

// On-disk format. See the package doc for the layout; bump formatVersion on any change
// the code cannot also read the old tree through, and an Open of an old tree wipes it.
// (The meta file has a second encoding read beside the first: validator.go.)
const (
	formatVersion = 2
	treeName      = "v2" // directory under Options.Dir holding the whole tree
	oldTreeName   = "v1" // the one-file-per-block tree of format 1, deleted by Open
	tmpName       = "tmp"
	lockName      = "lock"
	formatName    = "format"
	keyName       = "key"
	metaName      = "meta"
	dataName      = "data"
	indexName     = "index"

	// recLen is the size of an index record. 64 divides the 512-byte sector and the
	// 4 KiB page, so a record never straddles either and a torn write can damage only
	// records that were being written; 20 bytes of it are spare.
	recLen = 64
	// Offsets of the record fields.
	recMagic     = 0
	recVersion   = 4
	recRecLen    = 6
	recKeyID     = 8
	recBlock     = 16
	recBlockSize = 24
	recDataLen   = 28
	recDataCRC   = 32
	recStamp     = 36
	recCRC       = recLen - 4 // CRC-32C of every byte before it, spare ones included

	keyIDLen = 8 // bytes of the key's SHA-256 stored in each record

	dirPerm  = 0o700
	filePerm = 0o600
)

var recordMagic = [4]byte{'P', 'H', 'I', 'X'}

// castagnoli is the CRC-32C table; hash/crc32 uses the SSE4.2/ARMv8 instructions for it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errCorrupt is wrapped by every reason a block or a key directory is not served.
var errCorrupt = errors.New("corrupt block")

// record is the decoded index record of one block.
type record struct {
	keyID     [keyIDLen]byte
	block     uint64
	blockSize uint32
	dataLen   uint32
	dataCRC   uint32
	stamp     uint32 // last use, unix seconds (coarse: see touchInterval)
}

// encode writes r into b[:recLen].
func (r *record) encode(b []byte) {
	_ = b[recLen-1]
	clear(b[:recLen])
	copy(b[recMagic:], recordMagic[:])
	binary.LittleEndian.PutUint16(b[recVersion:], formatVersion)
	binary.LittleEndian.PutUint16(b[recRecLen:], recLen)
	copy(b[recKeyID:], r.keyID[:])
	binary.LittleEndian.PutUint64(b[recBlock:], r.block)
	binary.LittleEndian.PutUint32(b[recBlockSize:], r.blockSize)
	binary.LittleEndian.PutUint32(b[recDataLen:], r.dataLen)
	binary.LittleEndian.PutUint32(b[recDataCRC:], r.dataCRC)
	binary.LittleEndian.PutUint32(b[recStamp:], r.stamp)
	binary.LittleEndian.PutUint32(b[recCRC:], crc32.Checksum(b[:recCRC], castagnoli))
}

// decodeRecord parses and checks the self-consistency of b[:recLen]. Whether the record
// belongs to the key, block and block size asked for is the caller's check.
func decodeRecord(b []byte) (record, error) {
	var r record
	if len(b) < recLen {
		return r, fmt.Errorf("%w: record is %d bytes", errCorrupt, len(b))
	}
	if !bytes.Equal(b[recMagic:recMagic+4], recordMagic[:]) {
		return r, fmt.Errorf("%w: bad record magic %q", errCorrupt, string(b[recMagic:recMagic+4]))
	}
	if got := crc32.Checksum(b[:recCRC], castagnoli); got != binary.LittleEndian.Uint32(b[recCRC:]) {
		return r, fmt.Errorf("%w: record checksum mismatch", errCorrupt)
	}
	if v, l := binary.LittleEndian.Uint16(b[recVersion:]), binary.LittleEndian.Uint16(b[recRecLen:]); v != formatVersion || l != recLen {
		return r, fmt.Errorf("%w: format %d record length %d", errCorrupt, v, l)
	}
	copy(r.keyID[:], b[recKeyID:])
	r.block = binary.LittleEndian.Uint64(b[recBlock:])
	r.blockSize = binary.LittleEndian.Uint32(b[recBlockSize:])
	r.dataLen = binary.LittleEndian.Uint32(b[recDataLen:])
	r.dataCRC = binary.LittleEndian.Uint32(b[recDataCRC:])
	r.stamp = binary.LittleEndian.Uint32(b[recStamp:])
	return r, nil
}

// check reports why r cannot be block `block` of the key with id, in a cache of blockSize.
func (r *record) check(id [keyIDLen]byte, block, blockSize int64) error {
	switch {
	case r.keyID != id:
		return fmt.Errorf("%w: record belongs to another key", errCorrupt)
	case r.block != uint64(block):
		return fmt.Errorf("%w: record of block %d", errCorrupt, r.block)
	case int64(r.blockSize) != blockSize || r.dataLen == 0 || int64(r.dataLen) > blockSize:
		return fmt.Errorf("%w: record of %d bytes of a %d-byte block", errCorrupt, r.dataLen, r.blockSize)
	}
	return nil
}

// stampOf converts a time to a record stamp. uint32 seconds last until 2106; times
// before 1970 (a broken clock) become 0, the oldest.
func stampOf(unix int64) uint32 {
	return uint32(min(max(unix, 0), 1<<32-1))
}

// formatText is the content of v2/format: an Open that finds anything else wipes the tree.
func formatText(blockSize int64) []byte {
	return []byte(fmt.Sprintf("playhead block cache\nformat %d\nblocksize %d\n", formatVersion, blockSize))
}

// keyFile is the JSON form of a FileKey kept in each key directory.
type keyFile struct {
	Source  string `json:"source"`
	Path    string `json:"path"`
	Version string `json:"version"`
}

func encodeKey(k FileKey) []byte {
	b, _ := json.Marshal(keyFile(k)) // strings only: cannot fail
	return append(b, '\n')
}

// decodeKey parses a key file and checks that it belongs to the directory named dirName.
func decodeKey(b []byte, dirName string) (FileKey, error) {
	var kf keyFile
	if err := json.Unmarshal(b, &kf); err != nil {
		return FileKey{}, fmt.Errorf("%w: key file: %w", errCorrupt, err)
	}
	k := FileKey(kf)
	if sum := k.sum(); hex.EncodeToString(sum[:]) != dirName {
		return FileKey{}, fmt.Errorf("%w: key file names %v, which does not hash to %s", errCorrupt, k, dirName)
	}
	return k, nil
}

// keyDir is the directory of the key whose SHA-256 is sum, under tree.
func keyDir(tree string, sum [32]byte) string {
	h := hex.EncodeToString(sum[:])
	return filepath.Join(tree, h[:2], h)
}
