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
	"strconv"
	"strings"
)

// On-disk format. See the package doc for the layout; bump formatVersion on any change,
// and an Open of an old tree wipes it.
const (
	formatVersion = 1
	treeName      = "v1" // directory under Options.Dir holding the whole tree
	tmpName       = "tmp"
	lockName      = "lock"
	formatName    = "format"
	keyName       = "key"
	metaName      = "meta"
	blockSuffix   = ".blk"

	hdrLen = 40 // bytes of block header before the data
	// Offsets of the header fields.
	hdrMagic     = 0
	hdrVersion   = 4
	hdrHdrLen    = 6
	hdrKeyID     = 8
	hdrBlock     = 16
	hdrBlockSize = 24
	hdrDataLen   = 28
	hdrDataCRC   = 32
	hdrCRC       = 36

	keyIDLen = 8 // bytes of the key's SHA-256 stored in each header

	dirPerm  = 0o700
	filePerm = 0o600
)

var blockMagic = [4]byte{'P', 'H', 'B', 'K'}

// castagnoli is the CRC-32C table; hash/crc32 uses the SSE4.2/ARMv8 instructions for it.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errCorrupt is wrapped by every reason a block file is not served.
var errCorrupt = errors.New("corrupt block")

// blockHeader is the decoded header of a block file.
type blockHeader struct {
	keyID     [keyIDLen]byte
	block     uint64
	blockSize uint32
	dataLen   uint32
	dataCRC   uint32
}

// encode writes h into b[:hdrLen].
func (h *blockHeader) encode(b []byte) {
	_ = b[hdrLen-1]
	copy(b[hdrMagic:], blockMagic[:])
	binary.LittleEndian.PutUint16(b[hdrVersion:], formatVersion)
	binary.LittleEndian.PutUint16(b[hdrHdrLen:], hdrLen)
	copy(b[hdrKeyID:], h.keyID[:])
	binary.LittleEndian.PutUint64(b[hdrBlock:], h.block)
	binary.LittleEndian.PutUint32(b[hdrBlockSize:], h.blockSize)
	binary.LittleEndian.PutUint32(b[hdrDataLen:], h.dataLen)
	binary.LittleEndian.PutUint32(b[hdrDataCRC:], h.dataCRC)
	binary.LittleEndian.PutUint32(b[hdrCRC:], crc32.Checksum(b[:hdrCRC], castagnoli))
}

// decodeHeader parses and checks the self-consistency of b[:hdrLen]. Whether the header
// belongs to the block asked for is the caller's check.
func decodeHeader(b []byte) (blockHeader, error) {
	var h blockHeader
	if len(b) < hdrLen {
		return h, fmt.Errorf("%w: header is %d bytes", errCorrupt, len(b))
	}
	if !bytes.Equal(b[hdrMagic:hdrMagic+4], blockMagic[:]) {
		return h, fmt.Errorf("%w: bad magic %q", errCorrupt, b[hdrMagic:hdrMagic+4])
	}
	if got := crc32.Checksum(b[:hdrCRC], castagnoli); got != binary.LittleEndian.Uint32(b[hdrCRC:]) {
		return h, fmt.Errorf("%w: header checksum mismatch", errCorrupt)
	}
	if v, l := binary.LittleEndian.Uint16(b[hdrVersion:]), binary.LittleEndian.Uint16(b[hdrHdrLen:]); v != formatVersion || l != hdrLen {
		return h, fmt.Errorf("%w: format %d header length %d", errCorrupt, v, l)
	}
	copy(h.keyID[:], b[hdrKeyID:])
	h.block = binary.LittleEndian.Uint64(b[hdrBlock:])
	h.blockSize = binary.LittleEndian.Uint32(b[hdrBlockSize:])
	h.dataLen = binary.LittleEndian.Uint32(b[hdrDataLen:])
	h.dataCRC = binary.LittleEndian.Uint32(b[hdrDataCRC:])
	return h, nil
}

// formatText is the content of v1/format: an Open that finds anything else wipes the tree.
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

// The meta file is "<crc32c of etag, 8 hex digits>\n<etag>": a torn write is detected
// rather than read as a shorter ETag.
func encodeMeta(etag string) []byte {
	return []byte(fmt.Sprintf("%08x\n%s", crc32.Checksum([]byte(etag), castagnoli), etag))
}

func decodeMeta(b []byte) (string, error) {
	sum, etag, ok := strings.Cut(string(b), "\n")
	want, err := strconv.ParseUint(sum, 16, 32)
	if !ok || err != nil || len(sum) != 8 || uint32(want) != crc32.Checksum([]byte(etag), castagnoli) {
		return "", fmt.Errorf("%w: meta file", errCorrupt)
	}
	return etag, nil
}

// keyDir is the directory of the key whose SHA-256 is sum, under tree.
func keyDir(tree string, sum [32]byte) string {
	h := hex.EncodeToString(sum[:])
	return filepath.Join(tree, h[:2], h)
}

// blockPath is the file of block n in a key directory.
func blockPath(dir string, n int64) string {
	return dir + string(filepath.Separator) + strconv.FormatInt(n, 10) + blockSuffix
}

// parseBlockName returns n for a name "<n>.blk" in canonical form, or false.
func parseBlockName(name string) (int64, bool) {
	s, ok := strings.CutSuffix(name, blockSuffix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
		return 0, false
	}
	return n, true
}
