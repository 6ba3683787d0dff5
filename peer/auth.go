package peer

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Headers of a signed peer request.
const (
	HeaderTime      = "X-Playhead-Peer-Time"      // unix seconds when signed
	HeaderNonce     = "X-Playhead-Peer-Nonce"     // 16 random bytes, hex
	HeaderSignature = "X-Playhead-Peer-Signature" // HMAC-SHA256, hex
	HeaderFrom      = "X-Playhead-Peer-From"      // the sender's member name; absent from a tool
)

// MaxClockSkew is how far a request's time may be from the server's clock, either way.
// It bounds how long a captured request could be replayed if the nonce cache were lost
// (a restart), and so how long nonces are kept; NTP keeps LAN clocks well within it.
const MaxClockSkew = 30 * time.Second

// DefaultMaxNonces bounds the nonces remembered: a map entry of a 32-byte hex key and
// its expiry is about 100 bytes with the map's own overhead, so 1<<20 of them is about
// 100 MiB at worst, and it holds 17 000 requests a second for the whole window.
// When it is full, new requests are refused (never accepted unchecked) until old
// nonces expire.
const DefaultMaxNonces = 1 << 20

// nonceLen is the random part of a request, bytes: 128 bits never repeat by chance.
const nonceLen = 16

// Refusal reasons, counted by the server.
var (
	ErrUnsigned     = errors.New("peer request not signed")
	ErrBadSignature = errors.New("peer request signature does not match")
	ErrStale        = errors.New("peer request time outside the allowed clock skew")
	ErrReplayed     = errors.New("peer request nonce seen before")
	ErrNoncesFull   = errors.New("too many peer requests within the replay window")
	ErrWrongHost    = errors.New("peer request signed for another node")
)

// Signer signs outgoing peer requests. Safe for concurrent use.
type Signer struct {
	key  []byte
	from string // the member name the requests are sent as; "" for a tool
	now  func() time.Time
}

// NewSigner returns a signer with the request key of s, for requests from no member
// (a tool such as `playhead peers`).
func NewSigner(s Secret) *Signer { return &Signer{key: s.requestKey(), now: time.Now} }

// NewMemberSigner returns a signer for the requests of member name: they carry it,
// signed, so the server counts what it serves to each member.
func NewMemberSigner(s Secret, name string) *Signer {
	return &Signer{key: s.requestKey(), from: name, now: time.Now}
}

// Sign adds the time, a fresh nonce and the signature to req's headers. The signature
// covers req's target host (req.Host, else req.URL.Host), which must be the peer
// address the target node knows itself by: no other node accepts the request.
func (g *Signer) Sign(req *http.Request) error {
	var n [nonceLen]byte
	if _, err := rand.Read(n[:]); err != nil {
		return err
	}
	ts := strconv.FormatInt(g.now().Unix(), 10)
	nonce := hex.EncodeToString(n[:])
	req.Header.Set(HeaderTime, ts)
	req.Header.Set(HeaderNonce, nonce)
	if g.from != "" {
		req.Header.Set(HeaderFrom, g.from)
	}
	sig := mac(g.key, req.Method, targetHost(req), req.URL.RequestURI(), ts, nonce, g.from)
	req.Header.Set(HeaderSignature, hex.EncodeToString(sig))
	return nil
}

// targetHost is the host a request is for: its Host header on the server, the host it
// is sent to (or the Host set on it) on the client.
func targetHost(req *http.Request) string {
	if req.Host != "" {
		return req.Host
	}
	return req.URL.Host
}

// mac is the signature of one request: its signed parts are joined by newlines, which
// cannot occur in a method, a host, a request URI, a decimal time, a hex nonce or a
// header value (the sender's name), so no two requests share the signed text.
func mac(key []byte, method, host, uri, ts, nonce, from string) []byte {
	m := hmac.New(sha256.New, key)
	for _, part := range []string{"playhead-peer-v2", method, host, uri, ts, nonce, from} {
		m.Write([]byte(part))
		m.Write([]byte{'\n'})
	}
	return m.Sum(nil)
}

// Verifier checks incoming requests. Safe for concurrent use.
type Verifier struct {
	key       []byte
	hosts     []string // the node's own peer addresses: a request signed for another is refused
	now       func() time.Time
	maxNonces int

	mu        sync.Mutex
	nonces    map[string]time.Time // nonce → when it may be forgotten; guarded by mu
	sweep     time.Time            // next time expired nonces are dropped; guarded by mu
	fullSweep time.Time            // earliest next sweep of a full store; guarded by mu
}

// NewVerifier returns a verifier with the request key of s for a node whose peer HTTP
// address is one of hosts (host:port as the other nodes reach it: --peer-http, or the
// address gossip advertises). A request signed for any other host is refused, so a
// captured request cannot be replayed to another node, whose nonce store never saw it.
// With no hosts every request is refused.
func NewVerifier(s Secret, hosts []string) *Verifier {
	return &Verifier{key: s.requestKey(), hosts: slices.Clone(hosts), now: time.Now, maxNonces: DefaultMaxNonces,
		nonces: make(map[string]time.Time)}
}

// Verify checks req's signature, target host, time and nonce. The nonce is remembered
// only for a request whose signature is good and that is meant for this node, so
// unsigned or misdirected traffic cannot fill the cache.
func (v *Verifier) Verify(req *http.Request) error {
	ts, nonce, sig := req.Header.Get(HeaderTime), req.Header.Get(HeaderNonce), req.Header.Get(HeaderSignature)
	if ts == "" || nonce == "" || sig == "" {
		return ErrUnsigned
	}
	got, err := hex.DecodeString(sig)
	if err != nil || len(nonce) != 2*nonceLen {
		return ErrBadSignature
	}
	host := targetHost(req)
	if !hmac.Equal(got, mac(v.key, req.Method, host, req.URL.RequestURI(), ts, nonce, req.Header.Get(HeaderFrom))) {
		return ErrBadSignature
	}
	if !slices.ContainsFunc(v.hosts, func(h string) bool { return strings.EqualFold(h, host) }) {
		return ErrWrongHost
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return ErrBadSignature
	}
	now := v.now()
	at := time.Unix(sec, 0)
	if at.Before(now.Add(-MaxClockSkew)) || at.After(now.Add(MaxClockSkew)) {
		return ErrStale
	}
	return v.remember(nonce, at.Add(MaxClockSkew), now)
}

// remember records nonce until forget, or refuses it as a replay. A nonce needs keeping
// only while its time is inside the window: after that the time check refuses it.
func (v *Verifier) remember(nonce string, forget, now time.Time) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, seen := v.nonces[nonce]; seen {
		return ErrReplayed
	}
	// A full store is swept at most once a second: only holders of the secret reach
	// here, but a flood of them must not make every request scan a million entries.
	if now.After(v.sweep) || (len(v.nonces) >= v.maxNonces && now.After(v.fullSweep)) {
		for n, t := range v.nonces {
			if now.After(t) {
				delete(v.nonces, n)
			}
		}
		v.sweep, v.fullSweep = now.Add(MaxClockSkew), now.Add(time.Second)
	}
	if len(v.nonces) >= v.maxNonces {
		return ErrNoncesFull
	}
	v.nonces[nonce] = forget
	return nil
}
