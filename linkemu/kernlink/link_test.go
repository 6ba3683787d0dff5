package kernlink

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// requireNetns skips the test unless it can build a kernel-shaped link (root, TUN, tc),
// and fails instead when PLAYHEAD_REQUIRE_NETNS=1.
func requireNetns(t *testing.T) {
	t.Helper()
	if err := checkCan(); err != nil {
		if os.Getenv("PLAYHEAD_REQUIRE_NETNS") == "1" {
			t.Fatalf("PLAYHEAD_REQUIRE_NETNS=1 but: %v", err)
		}
		t.Skipf("needs root, /dev/net/tun and tc: %v", err)
	}
}

func TestLinkDelaysAndShapesHTTP(t *testing.T) {
	requireNetns(t)
	opts := Options{RTT: 100 * time.Millisecond, Bandwidth: 10_000_000}
	l, err := Start(opts)
	if err != nil {
		// Root in a container may still lack netns, TUN or tbf.
		if os.Getenv("PLAYHEAD_REQUIRE_NETNS") == "1" {
			t.Fatalf("PLAYHEAD_REQUIRE_NETNS=1 but: %v", err)
		}
		t.Skipf("cannot build a kernel-shaped link here: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if exec.Command("ip", "netns", "exec", l.Namespace(), "true").Run() == nil {
			t.Errorf("namespace %s left after Close", l.Namespace())
		}
	})
	ln, err := l.Listen(0)
	if err != nil {
		t.Fatal(err)
	}
	const size = 8 << 20
	body := bytes.Repeat([]byte("playhead"), size/8)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			w.Write([]byte("ok"))
			return
		}
		w.Write(body)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	base := "http://" + ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := &http.Client{}
	get := func(path string) (int64, time.Duration) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return n, time.Since(start)
	}
	get("/small") // opens the connection: handshake plus request
	_, rtt := get("/small")
	// A request on an open connection takes one round trip; the delay lines are never
	// early, and a loaded machine adds a little.
	if rtt < opts.RTT || rtt > opts.RTT+60*time.Millisecond {
		t.Errorf("request on an open connection took %v, want about the RTT %v", rtt, opts.RTT)
	}
	before, err := l.ServerTxBytes()
	if err != nil {
		t.Fatal(err)
	}
	n, took := get("/big")
	rate := float64(n) / took.Seconds()
	if n != size || rate > float64(opts.Bandwidth)*1.05 || rate < float64(opts.Bandwidth)*0.3 {
		t.Errorf("read %d bytes at %.1f MB/s, want %d below and near the link's %.1f MB/s",
			n, rate/1e6, size, float64(opts.Bandwidth)/1e6)
	}
	after, err := l.ServerTxBytes()
	if err != nil {
		t.Fatal(err)
	}
	if sent := after - before; sent < size || sent > size*11/10 {
		t.Errorf("the namespace's end sent %d bytes for a body of %d", sent, size)
	}
	t.Logf("rtt %v, %d bytes at %.1f MB/s, server sent %d", rtt, n, rate/1e6, after-before)
}

func TestStartRefusesBadOptions(t *testing.T) {
	if _, err := Start(Options{}); err == nil || !strings.Contains(err.Error(), "Bandwidth") {
		t.Fatalf("Start with no bandwidth: %v, want a Bandwidth error", err)
	}
}
