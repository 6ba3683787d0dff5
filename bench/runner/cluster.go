package runner

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"

	"github.com/playhead/playhead/bench/scenario"
	"github.com/playhead/playhead/internal/cluster"
	"github.com/playhead/playhead/origin"
)

// ClusterConfig is one run of the cluster scenario (scenario.ClusterName). It does not
// fit Run's model of one mount per trial and system: it runs a whole cluster of this
// binary's daemons once, with its own phases and table.
type ClusterConfig struct {
	// Exe is the playhead binary whose `mount` the nodes run.
	Exe string
	// Link is the link profile between the origin and every node (linkemu or kernel).
	Link string
	// Sizes are the scenario's knobs.
	Sizes scenario.ClusterSizes
	// TempDir holds the nodes' caches, mountpoints and logs, removed afterwards. Empty
	// means os.TempDir(). PLAYHEAD_BENCH_DAEMON_LOGS, when set, keeps the logs there.
	TempDir string
	// MountArgs are extra flags for every node's mount.
	MountArgs []string
	// Progress receives a line per phase.
	Progress io.Writer
}

// clusterCacheSize is each node's cache: the full set (2 GiB) twice over, so no block
// is evicted during the run and every node holds the whole set after phase (a).
const clusterCacheSize = "4GiB"

// RunCluster serves the cluster scenario's files from the built-in origin behind the
// link, starts the nodes, runs the phases and returns their figures and the link's
// description. A wrong byte is an error (scenario.IsMismatch).
func RunCluster(ctx context.Context, cfg ClusterConfig) (scenario.ClusterFigures, string, error) {
	if err := CheckLink(cfg.Link); err != nil {
		return scenario.ClusterFigures{}, "", err
	}
	files := scenario.ClusterFiles(cfg.Sizes)
	org := origin.New(origin.Options{Files: files})
	direct, err := org.Start("127.0.0.1:0")
	if err != nil {
		return scenario.ClusterFigures{}, "", err
	}
	defer org.Close()
	u, err := url.Parse(direct)
	if err != nil {
		return scenario.ClusterFigures{}, "", err
	}
	ls, err := startLink(cfg.Link, u.Host)
	if err != nil {
		return scenario.ClusterFigures{}, "", err
	}
	defer ls.close()
	dir, err := os.MkdirTemp(cfg.TempDir, "playhead-bench-cluster-")
	if err != nil {
		return scenario.ClusterFigures{}, ls.desc, err
	}
	defer os.RemoveAll(dir)
	var ready string
	for p := range files {
		ready = p
		break
	}
	fmt.Fprintf(cfg.Progress, "cluster: starting %d nodes over the %s link (%s)\n", cfg.Sizes.Nodes, cfg.Link, ls.desc)
	c, err := cluster.Start(ctx, cluster.Options{Exe: cfg.Exe, Source: ls.url, Nodes: cfg.Sizes.Nodes, Dir: dir,
		ReadyFile: ready, Args: append([]string{"--cache-size", clusterCacheSize}, cfg.MountArgs...)})
	if err != nil {
		return scenario.ClusterFigures{}, ls.desc, err
	}
	env := &clusterEnv{c: c, org: org, direct: direct, files: files}
	fig, runErr := scenario.RunCluster(ctx, env, cfg.Sizes, cfg.Progress)
	if err := c.Close(); err != nil && runErr == nil {
		runErr = err
	}
	keepClusterLogs(c, dir)
	return fig, ls.desc, runErr
}

// keepClusterLogs copies the nodes' logs to PLAYHEAD_BENCH_DAEMON_LOGS, if set.
func keepClusterLogs(c *cluster.Cluster, dir string) {
	keep := os.Getenv(daemonLogEnv)
	if keep == "" || os.MkdirAll(keep, 0o755) != nil {
		return
	}
	for i := range c.Len() {
		if data, err := os.ReadFile(c.Node(i).LogPath); err == nil {
			os.WriteFile(filepath.Join(keep, fmt.Sprintf("cluster-node%d.log", i)), data, 0o644)
		}
	}
}

// clusterEnv is scenario.ClusterEnv over a running cluster.
type clusterEnv struct {
	c      *cluster.Cluster
	org    *origin.Server
	direct string
	files  map[string]origin.File
}

func (e *clusterEnv) Nodes() int              { return e.c.Len() }
func (e *clusterEnv) Mountpoint(i int) string { return e.c.Node(i).Mountpoint }
func (e *clusterEnv) Kill(i int) error        { return e.c.Kill(i) }
func (e *clusterEnv) OriginBytes() int64      { return e.org.Stats().BytesWritten }
func (e *clusterEnv) ResetOrigin()            { e.org.ResetStats() }
func (e *clusterEnv) DirectURL() string       { return e.direct }
func (e *clusterEnv) StripeSize() int64       { return cluster.StripeSize() }

// Restart stops a running node first, with SIGTERM: it leaves the cluster, so the
// others drop it at once instead of after failure detection.
func (e *clusterEnv) Restart(ctx context.Context, i int, fresh bool, extra ...string) error {
	if n := e.c.Node(i); n.Running() {
		if err := n.Stop(); err != nil {
			return err
		}
	}
	return e.c.Restart(ctx, i, fresh, extra...)
}

// Owner asks the ring, with the file's version as every node's listing has it (read
// through node 0's mount).
func (e *clusterEnv) Owner(p string, off int64) (int, error) {
	st, err := os.Stat(filepath.Join(e.c.Node(0).Mountpoint, filepath.FromSlash(p)))
	if err != nil {
		return 0, err
	}
	return e.c.Owner(p, st.Size(), st.ModTime(), off)
}
