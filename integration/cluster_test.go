package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/cluster"
	"github.com/playhead/playhead/internal/pattern"
	"github.com/playhead/playhead/linkemu"
	"github.com/playhead/playhead/origin"
	"github.com/playhead/playhead/peer/peerserve"
)

// The cluster test runs 8 `playhead mount` daemons as separate processes (issue 16),
// over the built-in origin behind an emulated link.
const (
	// playheadBinEnv names a playhead binary to run instead of building one.
	playheadBinEnv = "PLAYHEAD_BIN"

	clusterNodes = 8
	clusterFiles = 8
	// clusterFileSize is three 8 MiB stripes: each file has owners on several nodes.
	clusterFileSize = 24 << 20
	// clusterReadChunk is what each read(2) asks for, as cp does.
	clusterReadChunk = 1 << 20
	// clusterOriginFactor is how many times the set's size the origin may serve when
	// every node reads the whole set: 1 plus slack for listings and block edges.
	clusterOriginFactor = 1.05
	// listingSlack is what the origin may serve for a pass that fetches no block: its
	// listings and stats, far less than one 256 KiB block.
	listingSlack = 64 << 10
)

// clusterLink is the link in front of the origin: a few round trips of it are visible,
// and its cap makes a node that reads everything from the origin slow, not free.
var clusterLink = linkemu.Options{RTT: 20 * time.Millisecond, Bandwidth: 200_000_000}

// playheadBinary returns PLAYHEAD_BIN, or builds the playhead command into a temporary
// directory of t.
func playheadBinary(t *testing.T) string {
	t.Helper()
	if exe := os.Getenv(playheadBinEnv); exe != "" {
		return exe
	}
	exe := filepath.Join(t.TempDir(), "playhead")
	out, err := exec.Command("go", "build", "-o", exe, "github.com/playhead/playhead/cmd/playhead").CombinedOutput()
	if err != nil {
		t.Fatalf("build playhead: %v\n%s", err, out)
	}
	return exe
}

// requireFUSE skips a test that needs FUSE where there is none, or fails it when
// PLAYHEAD_REQUIRE_FUSE=1.
func requireFUSE(t *testing.T) {
	t.Helper()
	_, err := os.Stat("/dev/fuse")
	if err == nil {
		_, err = exec.LookPath("fusermount3")
	}
	if err == nil {
		return
	}
	if os.Getenv("PLAYHEAD_REQUIRE_FUSE") == "1" {
		t.Fatalf("FUSE required but not available: %v", err)
	}
	t.Skipf("FUSE not available: %v", err)
}

// clusterSet is a set of generated files under dir.
type clusterSet struct {
	names []string
	files map[string]origin.File
}

// newClusterSet writes clusterFiles pattern files for the origin to serve from disk,
// under dir in a temporary directory of t, and notes each chunk's checksum on the way.
// The origin runs in the test process; generating the pattern there as it serves runs
// at about 80 MB/s under the race detector, slower than the link, and a slow origin
// makes the owners' answers late, which sends readers to the origin too.
func newClusterSet(t *testing.T, dir string, seed uint64) clusterSet {
	t.Helper()
	s := clusterSet{files: map[string]origin.File{}}
	root := t.TempDir()
	for i := range clusterFiles {
		p := fmt.Sprintf("%s/f%d.bin", dir, i)
		s.names = append(s.names, p)
		disk := filepath.Join(root, fmt.Sprintf("f%d.bin", i))
		if err := writeSummedPattern(disk, seed+uint64(i), clusterFileSize); err != nil {
			t.Fatal(err)
		}
		s.files[p] = origin.File{Seed: seed + uint64(i), Size: clusterFileSize, Path: disk}
	}
	return s
}

// writeSummedPattern writes the pattern for seed to path and records its chunks' sums.
func writeSummedPattern(path string, seed uint64, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	sums, err := patternChunks(seed, size, func(p []byte) error {
		_, err := f.Write(p)
		return err
	})
	if err != nil {
		f.Close()
		return err
	}
	chunkSums.Lock()
	if chunkSums.bySeed == nil {
		chunkSums.bySeed = map[uint64][]uint32{}
	}
	chunkSums.bySeed[seed] = sums
	chunkSums.Unlock()
	return f.Close()
}

func (s clusterSet) size() int64 { return int64(len(s.names)) * clusterFileSize }

// startClusterOrigin starts the origin with files behind clusterLink and returns it
// and the link's URL.
func startClusterOrigin(t *testing.T, files map[string]origin.File) (*origin.Server, string) {
	t.Helper()
	o, direct := startOrigin(t, files)
	_, linkURL := behindLink(t, direct, clusterLink)
	return o, linkURL
}

// startCluster starts n nodes of the playhead binary over src; they stop when the test
// ends, and their logs are printed if it failed.
func startCluster(t *testing.T, exe, src, readyFile string, n int) *cluster.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{
		Exe: exe, Source: src, Nodes: n, Dir: t.TempDir(), ReadyFile: readyFile,
		Args: []string{"--cache-size", "1GiB", "--io-timeout", "10s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d nodes mounted and their membership converged in %v", n, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		// Stopped first, the daemons have logged their counters too.
		start := time.Now()
		if err := c.Close(); err != nil {
			t.Errorf("stop the cluster: %v", err)
		}
		t.Logf("the cluster stopped in %v", time.Since(start).Round(time.Millisecond))
		if t.Failed() {
			t.Logf("daemon logs:%s", c.Logs())
		}
	})
	return c
}

// chunkSums holds the CRC-32C of every clusterReadChunk of each pattern file the
// cluster tests read, computed once before the reads are timed. A read of a whole
// chunk is checked by its checksum (hardware CRC, whose cost the race detector does not
// multiply as it does pattern.Verify's); any other read, or a checksum that differs, is
// checked byte by byte, which names the first wrong offset. The test process must not
// starve eight daemons of CPU on a small machine, where slow peers are hedged to the
// origin, which the tests count; and it keeps no copy of the files, whose memory would
// stay in the process (and the race detector's shadow) for the tests after it.
var chunkSums struct {
	sync.Mutex
	bySeed map[uint64][]uint32
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sumsOf returns the checksums of the chunks of the pattern file for seed.
func sumsOf(seed uint64, size int64) []uint32 {
	chunkSums.Lock()
	defer chunkSums.Unlock()
	if sums, ok := chunkSums.bySeed[seed]; ok {
		return sums
	}
	if chunkSums.bySeed == nil {
		chunkSums.bySeed = map[uint64][]uint32{}
	}
	sums, _ := patternChunks(seed, size, nil)
	chunkSums.bySeed[seed] = sums
	return sums
}

// patternChunks makes the pattern file for seed a chunk of clusterReadChunk bytes at a
// time, hands each to each (when not nil) and returns the chunks' checksums, or each's
// first error.
func patternChunks(seed uint64, size int64, each func(p []byte) error) ([]uint32, error) {
	buf := make([]byte, clusterReadChunk)
	var sums []uint32
	for off := int64(0); off < size; off += clusterReadChunk {
		p := buf[:min(clusterReadChunk, size-off)]
		pattern.Fill(seed, p, off)
		sums = append(sums, crc32.Checksum(p, castagnoli))
		if each != nil {
			if err := each(p); err != nil {
				return nil, err
			}
		}
	}
	return sums, nil
}

// verifyAt checks that p holds the bytes at off of the pattern for seed (size bytes).
func verifyAt(seed uint64, size int64, p []byte, off int64) error {
	whole := off%clusterReadChunk == 0 && off < size && int64(len(p)) == min(clusterReadChunk, size-off)
	if whole && crc32.Checksum(p, castagnoli) == sumsOf(seed, size)[off/clusterReadChunk] {
		return nil
	}
	if err := pattern.Verify(seed, p, off); err != nil {
		return err
	}
	if off+int64(len(p)) > size {
		return fmt.Errorf("%d bytes at %d run past the end (%d)", len(p), off, size)
	}
	return nil
}

// readVerified reads the file at path from start to end in clusterReadChunk reads and
// checks every byte against the pattern for seed; done counts the bytes read.
func readVerified(path string, seed uint64, size int64, done *atomic.Int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, clusterReadChunk)
	var off int64
	for {
		n, err := io.ReadFull(f, buf)
		if verr := verifyAt(seed, size, buf[:n], off); verr != nil {
			return fmt.Errorf("%s: %w", path, verr)
		}
		off += int64(n)
		if done != nil {
			done.Add(int64(n))
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("%s at %d: %w", path, off, err)
		}
	}
	if off != size {
		return fmt.Errorf("%s: read %d bytes, want %d", path, off, size)
	}
	return nil
}

// readSetOnNodes has every node in nodes read every file of set at once (node i starts
// at file i, so the files are first read on different nodes) and returns the first error.
func readSetOnNodes(c *cluster.Cluster, nodes []int, set clusterSet, done *atomic.Int64) error {
	errs := make(chan error, len(nodes)*len(set.names))
	var wg sync.WaitGroup
	for _, i := range nodes {
		wg.Go(func() {
			for k := range set.names {
				p := set.names[(i+k)%len(set.names)]
				if err := readVerified(c.Node(i).Path(p), set.files[p].Seed, clusterFileSize, done); err != nil {
					errs <- fmt.Errorf("node %d: %w", i, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return errors.Join(collect(errs)...)
}

func collect(ch <-chan error) []error {
	var out []error
	for err := range ch {
		out = append(out, err)
	}
	return out
}

func nodeRange(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// TestClusterOfProcesses runs the peer tier as separate daemons of one playhead binary,
// built once for its subtests.
func TestClusterOfProcesses(t *testing.T) {
	requireFUSE(t)
	exe := playheadBinary(t)
	t.Run("each block from the origin once", func(t *testing.T) { testReadsEachBlockOnce(t, exe) })
	t.Run("another secret is refused", func(t *testing.T) { testRefusesAnotherSecret(t, exe) })
	t.Run("versions never mixed", func(t *testing.T) { testNeverMixesVersions(t, exe) })
}

// Eight daemons read the same files at once: every byte is right and the origin serves
// the set about once. A node killed with SIGKILL in the middle of the others' reads
// costs none of them a read or a byte; restarted on its cache, it rejoins and reads what
// it held without the origin.
func testReadsEachBlockOnce(t *testing.T, exe string) {
	first, second := newClusterSet(t, "first", 1000), newClusterSet(t, "second", 2000)
	files := map[string]origin.File{}
	for _, s := range []clusterSet{first, second} {
		for p, f := range s.files {
			files[p] = f
		}
	}
	o, src := startClusterOrigin(t, files)
	c := startCluster(t, exe, src, first.names[0], clusterNodes)

	o.ResetStats()
	start := time.Now()
	if err := readSetOnNodes(c, nodeRange(0, clusterNodes), first, nil); err != nil {
		t.Fatal(err)
	}
	got := o.Stats().BytesWritten
	t.Logf("%d nodes read %d MiB each in %v; the origin served %.3f times the set", clusterNodes,
		first.size()>>20, time.Since(start).Round(time.Millisecond), float64(got)/float64(first.size()))
	if limit := int64(clusterOriginFactor * float64(first.size())); got > limit {
		t.Errorf("the origin served %d bytes for a set of %d: more than %.2f times", got, first.size(), clusterOriginFactor)
	}

	victim := busiestOwner(t, c, second)
	killDuringReads(t, c, victim, second)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	restart := time.Now()
	if err := c.Restart(ctx, victim, false); err != nil {
		t.Fatal(err)
	}
	t.Logf("node %d restarted and the membership converged in %v", victim, time.Since(restart).Round(time.Millisecond))
	o.ResetStats()
	if err := readSetOnNodes(c, []int{victim}, first, nil); err != nil {
		t.Fatal(err)
	}
	if got := o.Stats().BytesWritten; got > listingSlack {
		t.Errorf("the restarted node re-read what it had cached and the origin served %d bytes; want its cache used (at most %d for listings)", got, listingSlack)
	}
	readPeerOnlyOnEmptyCache(t, c, o, first)
}

// busiestOwner is the node that owns most stripes of set by the nodes' ring (at least
// one, or the test fails: a kill of a node that owns nothing would test nothing).
func busiestOwner(t *testing.T, c *cluster.Cluster, set clusterSet) int {
	t.Helper()
	count := make([]int, clusterNodes)
	for _, p := range set.names {
		st, err := os.Stat(c.Node(0).Path(p))
		if err != nil {
			t.Fatal(err)
		}
		for off := int64(0); off < st.Size(); off += cluster.StripeSize() {
			owner, err := c.Owner(p, st.Size(), st.ModTime(), off)
			if err != nil {
				t.Fatal(err)
			}
			count[owner]++
		}
	}
	best := 0
	for i, n := range count {
		if n > count[best] {
			best = i
		}
	}
	if count[best] == 0 {
		t.Fatalf("no node owns a stripe of the set: %v", count)
	}
	t.Logf("stripes of the set by owner: %v; node %d is killed", count, best)
	return best
}

// readPeerOnlyOnEmptyCache restarts a node on an empty cache and has it read the files
// of which it owns no stripe (by cluster.Owner, the nodes' ring): every byte comes from
// its peers, none from the origin.
func readPeerOnlyOnEmptyCache(t *testing.T, c *cluster.Cluster, o *origin.Server, set clusterSet) {
	t.Helper()
	const node = 1
	restart := time.Now()
	if err := c.Node(node).Stop(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Restart(ctx, node, true); err != nil {
		t.Fatal(err)
	}
	t.Logf("node %d stopped, restarted on an empty cache and the membership converged in %v", node, time.Since(restart).Round(time.Millisecond))
	var peerOnly clusterSet
	peerOnly.files = set.files
	for _, p := range set.names {
		st, err := os.Stat(c.Node(node).Path(p))
		if err != nil {
			t.Fatal(err)
		}
		mine := false
		for off := int64(0); off < st.Size(); off += cluster.StripeSize() {
			owner, err := c.Owner(p, st.Size(), st.ModTime(), off)
			if err != nil {
				t.Fatal(err)
			}
			mine = mine || owner == node
		}
		if !mine {
			peerOnly.names = append(peerOnly.names, p)
		}
	}
	if len(peerOnly.names) == 0 {
		t.Logf("node %d owns a stripe of every file: no peer-only read to check", node)
		return
	}
	o.ResetStats()
	if err := readSetOnNodes(c, []int{node}, peerOnly, nil); err != nil {
		t.Fatal(err)
	}
	if got := o.Stats().BytesWritten; got > listingSlack {
		t.Errorf("node %d on an empty cache read %d files it owns no stripe of, and the origin served %d bytes; want them all from peers",
			node, len(peerOnly.names), got)
	}
	t.Logf("node %d on an empty cache read %d files from its peers only", node, len(peerOnly.names))
}

// killReadsTimeout bounds the reads around a kill: far beyond their time under -race on
// a loaded machine, and a read stuck on a dead peer fails the test instead of hanging.
const killReadsTimeout = 3 * time.Minute

// killDuringReads has every node but victim read set, kills victim with SIGKILL once a
// quarter of the bytes have been read, and checks that no read failed or was wrong.
func killDuringReads(t *testing.T, c *cluster.Cluster, victim int, set clusterSet) {
	t.Helper()
	var readers []int
	for i := range clusterNodes {
		if i != victim {
			readers = append(readers, i)
		}
	}
	var done atomic.Int64
	result := make(chan error, 1)
	start := time.Now()
	go func() { result <- readSetOnNodes(c, readers, set, &done) }()
	total := int64(len(readers)) * set.size()
	const killAt = 4 // kill after 1/killAt of the bytes
	deadline := time.After(killReadsTimeout)
	for done.Load() < total/killAt {
		select {
		case err := <-result:
			t.Fatalf("the reads ended before the kill: %v", err)
		case <-deadline:
			t.Fatalf("the reads did not reach a quarter in %v:\n%s", killReadsTimeout, c.Logs())
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	killed, readAtKill := time.Since(start), done.Load()
	select {
	case err := <-result:
		if err != nil {
			t.Fatalf("a read failed or was wrong after node %d was killed: %v", victim, err)
		}
	case <-deadline:
		t.Fatalf("the reads did not end within %v of their start after node %d was killed:\n%s", killReadsTimeout, victim, c.Logs())
	}
	t.Logf("node %d killed at %v, with %d of %d bytes read; the reads ended at %v", victim,
		killed.Round(time.Millisecond), readAtKill, total, time.Since(start).Round(time.Millisecond))
}

// peerStatsLine is the peer tier's counters, logged when a daemon unmounts.
var peerStatsLine = regexp.MustCompile(`msg="peer tier" stats="\{PeerRuns:(\d+) PeerBytes:(\d+) .*Refused:(\d+) `)

// A node that holds another secret than the cluster's is refused by every node, and
// still reads the right bytes, from the origin.
func testRefusesAnotherSecret(t *testing.T, exe string) {
	set := newClusterSet(t, "set", 3000)
	o, src := startClusterOrigin(t, set.files)
	c := startCluster(t, exe, src, set.names[0], 3)
	if err := readSetOnNodes(c, []int{0, 1, 2}, set, nil); err != nil {
		t.Fatal(err)
	}

	other := filepath.Join(t.TempDir(), "other-secret")
	if err := cluster.WriteSecret(other); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n, err := c.StartOutsider(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	o.ResetStats()
	// Every file of the set, not one: the outsider's own ring (itself and the three
	// nodes, ports chosen at random) gave it all three stripes of one file in about one
	// run in 64, and it then asked no node anything, so nothing was refused (CI, session
	// 28). Over the whole set some stripe is a node's.
	for _, p := range set.names {
		if err := readVerified(n.Path(p), set.files[p].Seed, clusterFileSize, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := o.Stats().BytesWritten, int64(len(set.names))*clusterFileSize; got < want {
		t.Errorf("the origin served %d bytes of %d read by a node the cluster refuses: its peers served some", got, want)
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	m := peerStatsLine.FindStringSubmatch(n.Log())
	if m == nil {
		t.Fatalf("the outsider logged no peer tier counters:\n%s", n.Log())
	}
	if peerBytes, _ := strconv.Atoi(m[2]); peerBytes != 0 {
		t.Errorf("peers served the outsider %d bytes; want every request refused", peerBytes)
	}
	if refused, _ := strconv.Atoi(m[3]); refused == 0 {
		t.Errorf("no request of the outsider was refused (%s)", m[0])
	}
	// The outsider's Refused also counts 421s (its static ring names members unlike the
	// nodes'): the nodes' own 401 counts say the signature was what they refused.
	var unauthorized int64
	for i := range 3 {
		unauthorized += nodeUnauthorized(t, exe, c, i)
	}
	if unauthorized == 0 {
		t.Error("no node refused a request as unsigned or wrongly signed (401): the outsider's requests were not refused for its secret")
	}
}

// nodeUnauthorized asks node i for its view (playhead peers --json, signed with the
// cluster's secret) and returns how many requests it refused with 401.
func nodeUnauthorized(t *testing.T, exe string, c *cluster.Cluster, i int) int64 {
	t.Helper()
	out, err := exec.Command(exe, "peers", c.Node(i).HTTPAddr(), "--peer-secret-file", c.SecretPath(), "--json").Output()
	if err != nil {
		t.Fatalf("playhead peers %s: %v", c.Node(i).HTTPAddr(), err)
	}
	var v peerserve.MembersView
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("playhead peers --json: %v\n%s", err, out)
	}
	return v.Server.Unauthorized
}

// versionOf says which of two patterns p holds at off: 0 for seed0, 1 for seed1, or an
// error when it is neither (bytes of the two mixed, or of neither).
func versionOf(seed0, seed1 uint64, p []byte, off int64) (int, error) {
	err0 := verifyAt(seed0, clusterFileSize, p, off)
	if err0 == nil {
		return 0, nil
	}
	if verifyAt(seed1, clusterFileSize, p, off) == nil {
		return 1, nil
	}
	return -1, fmt.Errorf("%d bytes at %d are of neither version alone: %w", len(p), off, err0)
}

// readOneVersion reads the whole file at path in chunks, calling between after the first
// half, and checks that every byte the handle returned is of one version, until it
// fails with ESTALE, the documented error of a handle whose object changed (fusefs),
// and only after between returned: before it, nothing changed. It returns the version
// (-1 when the first read failed).
func readOneVersion(path string, seed0, seed1 uint64, between func()) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return -1, err
	}
	defer f.Close()
	buf := make([]byte, clusterReadChunk)
	version := -1
	changed := between == nil // a handle opened after the replacement may meet it at once
	for off := int64(0); off < clusterFileSize; off += clusterReadChunk {
		if off == clusterFileSize/2 && between != nil {
			between()
			changed = true
		}
		n, err := f.ReadAt(buf, off)
		if n > 0 {
			v, verr := versionOf(seed0, seed1, buf[:n], off)
			if verr != nil {
				return version, fmt.Errorf("%s: %w", path, verr)
			}
			if version >= 0 && v != version {
				return version, fmt.Errorf("%s: bytes of version %d at %d after bytes of version %d", path, v, off, version)
			}
			version = v
		}
		if err != nil && !errors.Is(err, io.EOF) {
			if changed && errors.Is(err, syscall.ESTALE) {
				return version, nil
			}
			return version, fmt.Errorf("%s at %d: %w", path, off, err)
		}
	}
	return version, nil
}

// An object replaced at the origin while every node reads it is never mixed: each handle
// returns the bytes of one version, or, once that version is gone, ESTALE.
func testNeverMixesVersions(t *testing.T, exe string) {
	const p = "replaced.bin"
	f := origin.File{Seed: 4000, Size: clusterFileSize}
	o, src := startClusterOrigin(t, map[string]origin.File{p: f})
	c := startCluster(t, exe, src, p, clusterNodes)
	seed0, seed1 := origin.Seed(f.Seed, 0), origin.Seed(f.Seed, 1)
	sumsOf(seed0, clusterFileSize)
	sumsOf(seed1, clusterFileSize)

	// Every node reads the first half, then the object is replaced once all have, then
	// every node reads on.
	var halfway sync.WaitGroup
	halfway.Add(clusterNodes)
	replaced := make(chan struct{})
	go func() {
		halfway.Wait()
		if err := o.Replace(p); err != nil {
			t.Error(err)
		}
		close(replaced)
	}()
	between := func() { halfway.Done(); <-replaced }
	errs := make(chan error, clusterNodes)
	var wg sync.WaitGroup
	for i := range clusterNodes {
		wg.Go(func() {
			called := false
			v, err := readOneVersion(c.Node(i).Path(p), seed0, seed1, func() { called = true; between() })
			if !called {
				halfway.Done() // it failed before halfway: the others must not wait for it
			}
			if err == nil && v != 0 {
				err = fmt.Errorf("a handle opened before the replacement returned version %d first", v)
			}
			if err != nil {
				errs <- fmt.Errorf("node %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(collect(errs)...); err != nil {
		t.Fatal(err)
	}
	// Handles opened after the replacement: each is one version, whichever its node's
	// listing still names.
	errs = make(chan error, clusterNodes)
	for i := range clusterNodes {
		wg.Go(func() {
			if _, err := readOneVersion(c.Node(i).Path(p), seed0, seed1, nil); err != nil {
				errs <- fmt.Errorf("node %d, after the replacement: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(collect(errs)...); err != nil {
		t.Fatal(err)
	}
}

// The cluster tests' checksum shortcut still catches one wrong byte, in a whole chunk
// and in a partial read.
func TestClusterVerifyCatchesAWrongByte(t *testing.T) {
	const seed, size = 77, 3 * clusterReadChunk
	p := make([]byte, clusterReadChunk)
	pattern.Fill(seed, p, clusterReadChunk)
	if err := verifyAt(seed, size, p, clusterReadChunk); err != nil {
		t.Fatalf("right bytes refused: %v", err)
	}
	p[12345] ^= 1
	if err := verifyAt(seed, size, p, clusterReadChunk); err == nil {
		t.Error("a wrong byte in a whole chunk passed")
	}
	if err := verifyAt(seed, size, p[:20000], clusterReadChunk); err == nil {
		t.Error("a wrong byte in a partial read passed")
	}
	if err := verifyAt(seed, size, p, 2*clusterReadChunk); err == nil {
		t.Error("a chunk served at the wrong offset passed")
	}
}
