package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/playhead/playhead/bench/play"
	"github.com/playhead/playhead/origin"
	"golang.org/x/sys/unix"
)

// readerNode is the node (b), (c) and (d) restart on an empty cache, each time. It is
// the only node whose cache is ever emptied, so the data it reads (the files of which
// it owns no stripe) is held by every owner, from (a): emptying a second node would
// leave that node's stripes to be fetched from the origin by their owner. Node 0, the
// gossip seed, is never restarted.
const readerNode = 1

// peerCopy is (b): readerNode, restarted on an empty cache, copies the files of
// which it owns no stripe, one after another; then the same files are fetched with plain
// GETs from the origin on loopback, verified alike: the ceiling of one copy.
func peerCopy(ctx context.Context, env ClusterEnv, files map[string]origin.File, fig *ClusterFigures, progress io.Writer) error {
	fig.PeerNode = readerNode
	// (a) leaves gigabytes of the eight caches dirty in the page cache, past the kernel's
	// background threshold: their writeback to this machine's one disk, and its CPU,
	// would run during the copy, which a node reading from peers on other machines does
	// not meet. Written back first, (b) measures the tier.
	unix.Sync()
	if err := env.Restart(ctx, readerNode, true); err != nil {
		return err
	}
	names, err := peerOnlyFiles(env, files, readerNode)
	if err != nil {
		return err
	}
	owned, err := stripesOwned(env, sortedNames(files), files)
	if err != nil {
		return err
	}
	fmt.Fprintf(progress, "cluster (b): stripes owned by node: %v; node %d owns none of %d of the %d files\n",
		owned, readerNode, len(names), len(files))
	if len(names) == 0 {
		fig.PeerCopyNote = fmt.Sprintf(" (not run: node %d owns a stripe of every file)", readerNode)
		return nil
	}
	env.ResetOrigin()
	start := time.Now()
	for _, p := range names {
		n, err := copyFile(env.Mountpoint(readerNode), p, files[p])
		fig.PeerBytes += n
		if err != nil {
			return err
		}
	}
	fig.PeerRate = float64(fig.PeerBytes) / time.Since(start).Seconds()
	fig.PeerOrigin = env.OriginBytes()
	fig.PeerFiles = len(names)
	rate, err := ceilingCopy(ctx, env.DirectURL(), names, files)
	fig.CeilingRate = rate
	if err != nil {
		return err
	}
	// Not a target: a failure here leaves (b)'s figures standing, with a note.
	fig.OwnRate, err = ownCacheCopy(ctx, env, names, files)
	var mm *MismatchError
	if errors.As(err, &mm) {
		return err
	}
	if err != nil {
		fig.OwnNote = err.Error()
	}
	return nil
}

// ownCacheCopy copies the files again through readerNode's mount once its own cache holds
// them, and returns the rate: the ceiling of any copy through a mount on this machine
// (FUSE, the daemon's read of its cache file and the checksum of each block), which a
// copy from peers cannot pass. A node keeps no copy of what it reads from peers
// (fetch.HeldBody), so the node restarts with --peer-local-copy, and two untimed passes
// land the blocks (a copy faster than the cache disk skips some in a pass:
// fetch/writer.go). Before each pass the kernel drops its pages of the files, which the
// mount would otherwise keep across opens of an unchanged file, so every read reaches the
// daemon; the daemon's cache files stay in the page cache.
func ownCacheCopy(ctx context.Context, env ClusterEnv, names []string, files map[string]origin.File) (float64, error) {
	if err := env.Restart(ctx, readerNode, false, "--peer-local-copy"); err != nil {
		return 0, err
	}
	mnt := env.Mountpoint(readerNode)
	var total int64
	var start time.Time
	for pass := range ownCachePasses {
		if err := dropPages(mnt, names); err != nil {
			return 0, err
		}
		start, total = time.Now(), 0
		for _, p := range names {
			n, err := copyFile(mnt, p, files[p])
			total += n
			if err != nil {
				return 0, fmt.Errorf("copy from its own cache, pass %d: %w", pass+1, err)
			}
		}
	}
	return float64(total) / time.Since(start).Seconds(), nil
}

// ownCachePasses: two passes fill the cache, the third is timed.
const ownCachePasses = 3

// dropPages asks the kernel to drop its cached pages of the files names under mnt.
func dropPages(mnt string, names []string) error {
	for _, p := range names {
		f, err := os.Open(path.Join(mnt, p))
		if err != nil {
			return fmt.Errorf("drop the kernel's pages: %w", err)
		}
		err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
		if err != nil {
			return fmt.Errorf("drop the kernel's pages of %s: %w", p, err)
		}
	}
	return nil
}

// ceilingCopy GETs each file from base in turn on one kept-alive connection, verifying
// every byte as the copy through the mount does, and returns the rate.
func ceilingCopy(ctx context.Context, base string, names []string, files map[string]origin.File) (float64, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	buf := make([]byte, copyReadSize)
	var total int64
	start := time.Now()
	for _, p := range names {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+p, nil)
		if err != nil {
			return 0, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return 0, fmt.Errorf("ceiling GET %s: %s", p, resp.Status)
		}
		var off int64
		for {
			n, rerr := io.ReadFull(resp.Body, buf)
			if verr := check(p, files[p], buf[:n], off); verr != nil {
				resp.Body.Close()
				return 0, verr
			}
			off += int64(n)
			if rerr != nil {
				break
			}
		}
		resp.Body.Close()
		if off != files[p].Size {
			return 0, fmt.Errorf("ceiling GET %s: %d bytes, want %d", p, off, files[p].Size)
		}
		total += off
	}
	return float64(total) / time.Since(start).Seconds(), nil
}

// playersPhase is (c) then (d): players on readerNode, restarted on an empty cache,
// play files of which it owns no stripe; then again on a new empty cache while the
// node owning most of their stripes is killed a quarter of the way in.
func playersPhase(ctx context.Context, env ClusterEnv, files map[string]origin.File, fig *ClusterFigures) error {
	fig.PlayNode = readerNode
	if err := env.Restart(ctx, readerNode, true); err != nil {
		return err
	}
	names, err := peerOnlyFiles(env, files, readerNode)
	if err != nil {
		return err
	}
	var spare []string // peer-only files no player reads: the lone reader's seeks
	if len(names) > fig.Sizes.Players {
		spare = names[fig.Sizes.Players:]
		names = names[:fig.Sizes.Players]
	}
	fig.PlayFiles = len(names)
	if len(names) == 0 {
		return fmt.Errorf("cluster: node %d owns a stripe of every file: no file to play from peers", readerNode)
	}
	res := playAll(ctx, env.Mountpoint(readerNode), names, files, fig.Sizes.Rate, nil)
	if err := res.mismatch(); err != nil {
		return err
	}
	fig.Freezes, fig.PlayFailed, fig.PlayWorstRd = res.freezes(), res.failed(), res.worstRead()
	fig.StartMedian, fig.StartWorst = res.startups()
	if err := seekAlone(ctx, env, spare, files, fig); err != nil {
		return err
	}

	if fig.Victim, err = busiestOwner(env, names, files, readerNode); err != nil {
		return err
	}
	if err := env.Restart(ctx, readerNode, true); err != nil {
		return err
	}
	playTime := time.Duration(float64(fig.Sizes.FileSize) / float64(fig.Sizes.Rate) * float64(time.Second))
	kill := func() error { return env.Kill(fig.Victim) }
	res = playAll(ctx, env.Mountpoint(readerNode), names, files, fig.Sizes.Rate, &timedKill{after: playTime / 4, kill: kill})
	fig.KillFreezes, fig.KillFailed, fig.KillWrong = res.freezes(), res.failed(), res.wrong()
	fig.KillStall, fig.KillWorstRead = res.worstStall(), res.worstRead()
	return res.killErr
}

// clusterSeeks, clusterSeekPlay and clusterSeekGap: (c)'s lone reader seeks at most
// this many times, each playing this much at the players' rate, to offsets this far
// apart (one stripe) in files no one on its node has read: past the read-ahead of the
// seek before (a 5 MiB first window), so every seek is cold on the node and its blocks
// come from a peer that holds them.
const (
	clusterSeeks    = 20
	clusterSeekPlay = 1 << 20
	clusterSeekGap  = 8 << 20
)

// seekAlone seeks one reader on readerNode into the files spare, whose every stripe is
// on peers and which no reader of its node opened, a stripe apart from 1 MiB on, and
// records the time to the first 256 KiB after each seek, and each seek's detail for the
// report (SeekDetail).
func seekAlone(ctx context.Context, env ClusterEnv, spare []string, files map[string]origin.File, fig *ClusterFigures) error {
	mnt := env.Mountpoint(readerNode)
	var ttf []time.Duration
	var detail []string
	for _, p := range spare {
		f := files[p]
		vf, err := openVerified(os.DirFS(mnt), p, f)
		if err != nil {
			return err
		}
		for off := int64(1 << 20); off+clusterSeekPlay <= f.Size && len(ttf) < clusterSeeks; off += clusterSeekGap {
			res, err := play.Run(ctx, vf, f.Size, play.Options{Rate: fig.Sizes.Rate, Start: off, Limit: clusterSeekPlay})
			if err != nil {
				vf.Close()
				return fmt.Errorf("cluster seek at %d of %s: %w", off, p, err)
			}
			ttf = append(ttf, res.Startup)
			owner, _ := env.Owner(p, off)
			detail = append(detail, fmt.Sprintf("%.1f@%s+%dMiB/n%d", float64(res.Startup.Microseconds())/1000, path.Base(p), off>>20, owner))
		}
		vf.Close()
	}
	if len(ttf) == 0 {
		return nil
	}
	fig.SeekDetail = strings.Join(detail, " ")
	slices.Sort(ttf)
	fig.Seeks, fig.SeekMedian, fig.SeekWorst = len(ttf), ttf[len(ttf)/2], ttf[len(ttf)-1]
	return nil
}

// busiestOwner is the node other than reader that owns most stripes of names.
func busiestOwner(env ClusterEnv, names []string, files map[string]origin.File, reader int) (int, error) {
	count, err := stripesOwned(env, names, files)
	if err != nil {
		return 0, err
	}
	count[reader] = -1
	return slices.Index(count, slices.Max(count)), nil
}

// stripesOwned counts the stripes of names each node owns, by node index.
func stripesOwned(env ClusterEnv, names []string, files map[string]origin.File) ([]int, error) {
	count := make([]int, env.Nodes())
	for _, p := range names {
		for off := int64(0); off < files[p].Size; off += env.StripeSize() {
			o, err := env.Owner(p, off)
			if err != nil {
				return nil, err
			}
			count[o]++
		}
	}
	return count, nil
}

// timedKill kills a node once, after a delay from the players' start.
type timedKill struct {
	after time.Duration
	kill  func() error
}

// plays are the results of players that ran at once.
type plays struct {
	results []play.Result
	errs    []error
	killErr error
}

// playAll plays every file of names at rate at once on the mount at mnt, each through
// a verifying reader; k, if not nil, runs its kill during the plays.
func playAll(ctx context.Context, mnt string, names []string, files map[string]origin.File, rate int64, k *timedKill) plays {
	res := plays{results: make([]play.Result, len(names)), errs: make([]error, len(names))}
	var wg sync.WaitGroup
	if k != nil {
		wg.Go(func() {
			select {
			case <-time.After(k.after):
				res.killErr = k.kill()
			case <-ctx.Done():
			}
		})
	}
	for i, p := range names {
		wg.Go(func() {
			vf, err := openVerified(os.DirFS(mnt), p, files[p])
			if err != nil {
				res.errs[i] = err
				return
			}
			defer vf.Close()
			res.results[i], res.errs[i] = play.Run(ctx, vf, files[p].Size, play.Options{Rate: rate})
		})
	}
	wg.Wait()
	return res
}

func (r plays) mismatch() error {
	for _, err := range r.errs {
		if IsMismatch(err) {
			return err
		}
	}
	return nil
}

func (r plays) failed() (n int) {
	for _, err := range r.errs {
		if err != nil && !IsMismatch(err) {
			n++
		}
	}
	return n
}

func (r plays) wrong() (n int) {
	for _, err := range r.errs {
		if IsMismatch(err) {
			n++
		}
	}
	return n
}

func (r plays) freezes() (n int) {
	for _, res := range r.results {
		n += res.Freezes
	}
	return n
}

func (r plays) worstStall() (d time.Duration) {
	for _, res := range r.results {
		d = max(d, res.WorstStall)
	}
	return d
}

func (r plays) worstRead() (d time.Duration) {
	for _, res := range r.results {
		for _, s := range res.Samples {
			d = max(d, s.Latency)
		}
	}
	return d
}

// startups are the median and worst first-read latency: the time to the first 256 KiB
// (play's default chunk) of a cold file.
func (r plays) startups() (median, worst time.Duration) {
	var all []time.Duration
	for _, res := range r.results {
		if res.Bytes > 0 {
			all = append(all, res.Startup)
		}
	}
	if len(all) == 0 {
		return 0, 0
	}
	slices.Sort(all)
	return all[len(all)/2], all[len(all)-1]
}
