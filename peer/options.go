package peer

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// Options configure a Source. Start from DefaultOptions.
type Options struct {
	// BlockSize is fetch's block size (the cache's), bytes: a stripe is whole blocks of
	// it, so one block of the cache has one owner. Default 256 KiB.
	BlockSize int64
	// StripeBlocks is the unit of ownership: each stripe of this many consecutive
	// blocks has one owner. Default 32, 8 MiB of 256 KiB blocks: a sequential reader
	// asks each owner for 8 MiB at a time (one request, not one per block) and reads
	// its own stripes from the origin in ranges as long (on a 200 ms link a 256 KiB
	// range is mostly round trip), while a file of a few hundred MiB still spreads
	// over every node of an 8-node cluster (a 1 GiB file is 128 stripes, 16 a node).
	// Every node of a cluster must use the same value, as it must the block size.
	StripeBlocks int64
	// Self is this node's member name: runs it owns go to the origin. Required.
	Self string
	// SourceID names the source on the wire (Secret.SourceID of the spec). Required.
	SourceID string
	// Secret signs the requests. Required.
	Secret Secret
	// Members gives the live members. Required.
	Members Membership
	// Client sends peer requests. nil: a client of its own with keep-alive connections.
	Client *http.Client
	// Scheme of the peers' endpoints: "http" (default) or "https" (Client must then
	// trust the cluster's CA: TLS.Client).
	Scheme string
	// Ahead is how many runs past the one being read are opened in parallel, nearest
	// first, so a reader of a range that spans owners waits for at most one peer round
	// trip, not one per run. fetch asks for one run at a time (it cuts its ranges where
	// RunEnd says); other readers of the Source may span many. Default 4.
	Ahead int
	// HedgeMult, HedgeFloor, HedgeCeiling: a peer that has said nothing (not 102, not
	// its headers) within clamp(HedgeMult × its usual answer time + this node's usual
	// origin first-byte time, HedgeFloor, HedgeCeiling) is bypassed for the origin
	// (hedge.go; the usual time is raised to its mean plus four deviations when its
	// answers scatter). A peer that said 102 may take that plus HedgeCeiling to its
	// headers; an answer's body may be silent for that plus HedgeCeiling, or plus the
	// origin's usual time to deliver a block if longer (hedge.go bodyBudget).
	// Defaults 4, 50 ms and 1 s.
	HedgeMult    float64
	HedgeFloor   time.Duration
	HedgeCeiling time.Duration
	// LocalCopy writes the blocks this node reads from their owners to its own cache
	// too, as it writes the blocks it reads from the origin. Off by default: the owner
	// keeps each block, so the nodes' caches add up to the cluster's capacity and a
	// reading node spends no disk write on a block a LAN hop away (fetch.HeldBody). On:
	// a node that reads the same data again and again keeps it off the LAN, and keeps
	// reading it while its owner is down, at the cost of a copy in every such node.
	LocalCopy bool
	// Logger receives the tier's logs. nil means slog.Default().
	Logger *slog.Logger
}

// Defaults of Options; see the fields.
const (
	DefaultBlockSize    = 256 << 10
	DefaultStripeBlocks = 32
	DefaultAhead        = 4
	DefaultHedgeMult    = 4
	DefaultHedgeFloor   = 50 * time.Millisecond
	DefaultHedgeCeiling = time.Second
)

// DefaultOptions returns the defaults; the required fields are left empty.
func DefaultOptions() Options {
	return Options{
		BlockSize: DefaultBlockSize, StripeBlocks: DefaultStripeBlocks, Scheme: "http", Ahead: DefaultAhead,
		HedgeMult: DefaultHedgeMult, HedgeFloor: DefaultHedgeFloor, HedgeCeiling: DefaultHedgeCeiling,
	}
}

// Validate checks o.
func (o Options) Validate() error {
	switch {
	case o.BlockSize <= 0:
		return fmt.Errorf("peer: block size %d must be positive", o.BlockSize)
	case o.StripeBlocks <= 0:
		return fmt.Errorf("peer: stripe of %d blocks: must be at least one", o.StripeBlocks)
	case o.Self == "":
		return errors.New("peer: Self (this node's member name) is required")
	case o.SourceID == "":
		return errors.New("peer: SourceID is required")
	case o.Secret.IsZero():
		return errors.New("peer: the shared secret is required")
	case o.Members == nil:
		return errors.New("peer: Members is required")
	case o.Scheme != "http" && o.Scheme != "https":
		return fmt.Errorf("peer: scheme %q must be http or https", o.Scheme)
	case o.Ahead < 0:
		return fmt.Errorf("peer: Ahead %d must not be negative", o.Ahead)
	case o.HedgeMult < 1:
		return fmt.Errorf("peer: HedgeMult %v must be at least 1", o.HedgeMult)
	case o.HedgeFloor <= 0 || o.HedgeCeiling < o.HedgeFloor:
		return fmt.Errorf("peer: hedge bounds %v..%v: want 0 < floor <= ceiling", o.HedgeFloor, o.HedgeCeiling)
	}
	return nil
}
