package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/playhead/playhead/origin"
)

// ClusterName is the cluster scenario (issue 16): eight playhead daemons mount the same
// origin with the peer tier. It is not in Names and not a Case: it runs its own phases
// on a whole cluster (ClusterEnv), where a Case mounts one system at a time, and prints
// its own table (ClusterFigures.Print). Its phases:
//
//	(a) every node copies the whole set at once: origin bytes over the set's size, every
//	    byte verified, the wall time;
//	(b) a node restarted on an empty cache copies the files whose every stripe a peer
//	    owns (it owns none of them), next to a plain HTTP GET of the same files from the
//	    origin on loopback, without the link: the ceiling of one copy in this run;
//	(c) paced players on the same node, restarted on an empty cache again, play such
//	    files: freezes and the time to the first 256 KiB (each play starts cold, all
//	    at once); then one reader alone seeks, a stripe apart, into other such files:
//	    the time to the first 256 KiB after each seek (the seek figure);
//	(d) the same players on the same node, restarted empty again, while the node that
//	    owns most of their stripes is killed with SIGKILL: failed reads, wrong bytes,
//	    the worst stall.
const ClusterName = "cluster"

// ClusterSizes are the cluster scenario's knobs.
type ClusterSizes struct {
	Nodes    int   // daemons
	Files    int   // files in the set
	FileSize int64 // bytes each
	Players  int   // (c) and (d): players at once
	Rate     int64 // (c) and (d): each player's bitrate, bytes/s
}

// FullCluster is the benchmark's cluster: 8 nodes, a 2 GiB set of 64 files of 32 MiB
// (four 8 MiB stripes each: a file is on several owners, and a node owns no stripe of
// about (7/8)^4, 60%, of them), 4 players at 20 MB/s.
func FullCluster() ClusterSizes {
	return ClusterSizes{Nodes: 8, Files: 64, FileSize: 32 << 20, Players: 4, Rate: 20_000_000}
}

// QuickCluster is about ten times smaller: 8 files of 24 MiB (three stripes each).
func QuickCluster() ClusterSizes {
	s := FullCluster()
	s.Files, s.FileSize = 8, 24<<20
	return s
}

// ClusterFiles are the set's files by origin path.
func ClusterFiles(s ClusterSizes) map[string]origin.File {
	files := map[string]origin.File{}
	for i := range s.Files {
		p := mediaName(ClusterName, i)
		files[p] = newFile(p, s.FileSize)
	}
	return files
}

// ClusterEnv is a running cluster as the scenario drives it. It is owned here because
// the scenario is its only user; the runner implements it over internal/cluster.
type ClusterEnv interface {
	// Nodes is the number of nodes.
	Nodes() int
	// Mountpoint is node i's mountpoint.
	Mountpoint(i int) string
	// Kill kills node i with SIGKILL and detaches its mount.
	Kill(i int) error
	// Restart starts node i again, on an empty new cache when fresh is set and with the
	// extra mount flags for this run only, and returns once the membership has converged.
	Restart(ctx context.Context, i int, fresh bool, extra ...string) error
	// Owner is the running node that owns the stripe at off of the file at p.
	Owner(p string, off int64) (int, error)
	// StripeSize is the unit of ownership, bytes.
	StripeSize() int64
	// OriginBytes is what the origin has served since the last ResetOrigin.
	OriginBytes() int64
	ResetOrigin()
	// DirectURL is the origin's base URL on loopback, without the link (ending in '/').
	DirectURL() string
}

// ClusterFigures are the scenario's results.
type ClusterFigures struct {
	Sizes    ClusterSizes
	SetBytes int64
	// Done is how many of the three steps — (a), (b), (c) with (d) — ended without an
	// error; the figures of the others are partial or zero, and Print says so.
	Done int

	// (a)
	CopyWall     time.Duration
	OriginFactor float64 // origin bytes / SetBytes
	Verified     int64   // bytes checked against the pattern
	CopyFailed   int     // files whose copy failed

	// (b)
	PeerNode    int
	PeerFiles   int
	PeerBytes   int64
	PeerRate    float64 // bytes/s
	PeerOrigin  int64   // origin bytes during the copy (0 when no stripe was the node's)
	CeilingRate float64 // bytes/s of plain GETs of the same files on loopback
	// OwnRate is the same copy again through PeerNode's mount from its own cache: the
	// ceiling of any read through a mount here (0: not measured).
	OwnRate      float64
	OwnNote      string // why OwnRate was not measured, if it was not
	PeerCopyNote string // why (b) did not run, if it did not

	// (c)
	PlayNode    int
	PlayFiles   int
	Freezes     int
	StartWorst  time.Duration // worst time to the first 256 KiB of a cold play (4 at once)
	StartMedian time.Duration
	Seeks       int           // seeks of one reader alone into a file on peers (0: none left)
	SeekMedian  time.Duration // their time to the first 256 KiB
	SeekWorst   time.Duration
	SeekDetail  string // each seek: its time in ms @ file + offset / the stripe's owner
	PlayFailed  int
	PlayWorstRd time.Duration // worst read latency

	// (d)
	Victim        int
	KillFreezes   int
	KillFailed    int
	KillWrong     int
	KillStall     time.Duration // worst stall (lateness) of any player
	KillWorstRead time.Duration // worst read latency of any player
}

// RunCluster runs the phases on env and returns the figures; progress gets a line per
// phase. A wrong byte in (a), (b) or (c) ends the run with a *MismatchError.
func RunCluster(ctx context.Context, env ClusterEnv, s ClusterSizes, progress io.Writer) (ClusterFigures, error) {
	files := ClusterFiles(s)
	fig := ClusterFigures{Sizes: s, SetBytes: int64(s.Files) * s.FileSize}
	if err := copyAll(ctx, env, files, &fig); err != nil {
		return fig, err
	}
	fig.Done++
	fmt.Fprintf(progress, "cluster (a): %d nodes copied %d files in %v, origin %.3fx the set\n",
		env.Nodes(), len(files), fig.CopyWall.Round(time.Millisecond), fig.OriginFactor)
	if err := peerCopy(ctx, env, files, &fig, progress); err != nil {
		return fig, err
	}
	fig.Done++
	fmt.Fprintf(progress, "cluster (b): node %d copied %d files from peers at %.0f MB/s (loopback GET %.0f MB/s, from its own cache %.0f MB/s)%s%s\n",
		fig.PeerNode, fig.PeerFiles, fig.PeerRate/1e6, fig.CeilingRate/1e6, fig.OwnRate/1e6, fig.PeerCopyNote, fig.OwnNote)
	if err := playersPhase(ctx, env, files, &fig); err != nil {
		return fig, err
	}
	fig.Done++
	fmt.Fprintf(progress, "cluster (c): seeks, ms@file+offset/owner: %s\n", fig.SeekDetail)
	fmt.Fprintf(progress, "cluster (c)+(d): %d players on node %d; freezes %d, then %d with node %d killed\n",
		fig.PlayFiles, fig.PlayNode, fig.Freezes, fig.KillFreezes, fig.Victim)
	return fig, nil
}

// copyReadSize is each read of a copy, as cp asks.
const copyReadSize = 1 << 20

// copyFile reads the file at p of the mount at mnt to its end, verifying every byte; it
// returns the bytes read.
func copyFile(mnt, p string, f origin.File) (int64, error) {
	fh, err := os.Open(path.Join(mnt, p))
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	buf := make([]byte, copyReadSize)
	var off int64
	for {
		n, err := io.ReadFull(fh, buf)
		if verr := check(p, f, buf[:n], off); verr != nil {
			return off, verr
		}
		off += int64(n)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return off, fmt.Errorf("%s at %d: %w", p, off, err)
		}
	}
	if off != f.Size {
		return off, &MismatchError{Path: p, Err: fmt.Errorf("copied %d bytes, origin has %d", off, f.Size)}
	}
	return off, nil
}

// copyAll is (a): node i copies the set in path order starting at file i, all nodes at
// once, so the first reads of the files are spread over the nodes.
func copyAll(ctx context.Context, env ClusterEnv, files map[string]origin.File, fig *ClusterFigures) error {
	names := sortedNames(files)
	env.ResetOrigin()
	start := time.Now()
	var verified atomic.Int64
	var failed atomic.Int32
	var firstMismatch error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range env.Nodes() {
		wg.Go(func() {
			for k := range names {
				if ctx.Err() != nil {
					return
				}
				p := names[(i+k)%len(names)]
				n, err := copyFile(env.Mountpoint(i), p, files[p])
				verified.Add(n)
				if err != nil {
					failed.Add(1)
					mu.Lock()
					if IsMismatch(err) && firstMismatch == nil {
						firstMismatch = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	fig.CopyWall = time.Since(start)
	fig.OriginFactor = float64(env.OriginBytes()) / float64(fig.SetBytes)
	fig.Verified, fig.CopyFailed = verified.Load(), int(failed.Load())
	if firstMismatch != nil {
		return firstMismatch
	}
	return ctx.Err()
}

func sortedNames(files map[string]origin.File) []string {
	var names []string
	for p := range files {
		names = append(names, p)
	}
	slices.Sort(names)
	return names
}

// peerOnlyFiles are the files of which node owns no stripe, in path order.
func peerOnlyFiles(env ClusterEnv, files map[string]origin.File, node int) ([]string, error) {
	stripe := env.StripeSize()
	var out []string
	for _, p := range sortedNames(files) {
		mine := false
		for off := int64(0); off < files[p].Size && !mine; off += stripe {
			o, err := env.Owner(p, off)
			if err != nil {
				return nil, err
			}
			mine = o == node
		}
		if !mine {
			out = append(out, p)
		}
	}
	return out, nil
}
