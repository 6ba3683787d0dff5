package peer

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
)

// MinSecretLen is the shortest shared secret accepted, in bytes. Every key of the tier is
// derived from it; below 16 bytes (128 bits) an offline guess of a captured signature
// becomes thinkable.
const MinSecretLen = 16

// HKDF labels: each use of the secret gets its own key, so a key that leaks from one
// use (memberlist's keyring sits in its config) opens none of the others.
const (
	labelGossip   = "playhead peer v1 memberlist keyring"
	labelRequests = "playhead peer v1 request hmac"
	labelSourceID = "playhead peer v1 source id"
)

// gossipKeyLen is memberlist's AES-256 key length: its SecretKey takes 16, 24 or 32 bytes.
const gossipKeyLen = 32

// requestKeyLen is the HMAC-SHA256 key length: the hash's block-size-free optimum.
const requestKeyLen = 32

// ErrShortSecret is returned for a secret shorter than MinSecretLen.
var ErrShortSecret = fmt.Errorf("peer secret is shorter than %d bytes", MinSecretLen)

// Secret is the shared secret of a cluster. Its bytes are never printed: String and
// GoString redact it, and errors about it name only the file.
type Secret struct {
	raw []byte
}

// NewSecret wraps raw (copied). It fails for a secret shorter than MinSecretLen.
func NewSecret(raw []byte) (Secret, error) {
	if len(raw) < MinSecretLen {
		return Secret{}, ErrShortSecret
	}
	return Secret{raw: append([]byte(nil), raw...)}, nil
}

// LoadSecret reads the secret from the file at path (--peer-secret-file). A trailing
// newline, as editors and `echo` leave, is not part of the secret.
func LoadSecret(path string) (Secret, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		// os errors name the path and the cause, never the contents.
		return Secret{}, fmt.Errorf("peer secret file: %w", err)
	}
	for len(raw) > 0 && (raw[len(raw)-1] == '\n' || raw[len(raw)-1] == '\r') {
		raw = raw[:len(raw)-1]
	}
	s, err := NewSecret(raw)
	if err != nil {
		return Secret{}, fmt.Errorf("peer secret file %s: %w", path, err)
	}
	return s, nil
}

// String redacts the secret, so a Secret in a log line or %v shows nothing of it.
func (s Secret) String() string { return "[peer secret redacted]" }

// GoString redacts the secret for %#v too.
func (s Secret) GoString() string { return s.String() }

// IsZero reports whether s holds no secret.
func (s Secret) IsZero() bool { return len(s.raw) == 0 }

// derive returns the key of one label.
func (s Secret) derive(label string, n int) []byte {
	if s.IsZero() {
		panic(errors.New("peer: key derived from an empty secret"))
	}
	k, err := hkdf.Key(sha256.New, s.raw, nil, label, n)
	if err != nil {
		panic(fmt.Errorf("peer: hkdf: %w", err)) // only for n beyond 255 hash lengths
	}
	return k
}

// GossipKey is memberlist's SecretKey: its gossip is encrypted and authenticated with it.
func (s Secret) GossipKey() []byte { return s.derive(labelGossip, gossipKeyLen) }

// requestKey is the key of the requests' HMAC.
func (s Secret) requestKey() []byte { return s.derive(labelRequests, requestKeyLen) }

// SourceID names a source spec on the wire: a keyed hash, so the spec (an URL that may
// hold credentials) never crosses the network and cannot be guessed from the ID by
// anyone without the secret. Nodes that mount the same spec get the same ID.
func (s Secret) SourceID(spec string) string {
	m := hmac.New(sha256.New, s.derive(labelSourceID, requestKeyLen))
	m.Write([]byte(spec))
	return hex.EncodeToString(m.Sum(nil)[:16])
}
