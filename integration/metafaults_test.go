package integration

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/source/sources"
)

// metaFaultOrigin is a raw HTTP/1.1 server whose root lists three directories and one
// file without size; each directory's listing breaks the connection in its own way,
// and the file's HEAD is never answered:
//
//	/hdr/       headers (Content-Length 1000), then silence
//	/mid/       headers and part of the body, then silence
//	/rst/       headers and part of the body, then a TCP reset
//	/nosize.bin no answer to HEAD at all
//
// A silent connection stays open until the test ends.
type metaFaultOrigin struct {
	ln   net.Listener
	stop chan struct{}
	wg   sync.WaitGroup
}

const metaFaultRoot = `[{"name":"hdr","type":"directory"},{"name":"mid","type":"directory"},` +
	`{"name":"rst","type":"directory"},{"name":"nosize.bin","type":"file"}]`

func startMetaFaultOrigin(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &metaFaultOrigin{ln: ln, stop: make(chan struct{})}
	o.wg.Add(1)
	go o.accept()
	t.Cleanup(func() {
		close(o.stop)
		ln.Close()
		o.wg.Wait()
	})
	return "http://" + ln.Addr().String() + "/"
}

func (o *metaFaultOrigin) accept() {
	defer o.wg.Done()
	for {
		c, err := o.ln.Accept()
		if err != nil {
			return
		}
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			defer c.Close()
			go func() { <-o.stop; c.Close() }() // unblocks the reads below at the end
			o.serve(c.(*net.TCPConn))
		}()
	}
}

func (o *metaFaultOrigin) serve(c *net.TCPConn) {
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		silent := func() { <-o.stop }
		switch req.URL.Path {
		case "/":
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(metaFaultRoot))
			if req.Method == http.MethodGet {
				c.Write([]byte(metaFaultRoot))
			}
			continue
		case "/hdr/":
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"))
			silent()
		case "/mid/":
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n[{\"name\":\"a"))
			silent()
		case "/rst/":
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n[{\"name\":\"a"))
			time.Sleep(50 * time.Millisecond)
			c.SetLinger(0) // Close sends RST
		case "/nosize.bin":
			silent()
		default:
			c.Write([]byte("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"))
			continue
		}
		return
	}
}

// Listings and HEADs on a connection that goes silent after the headers, goes silent
// mid-body, or is reset mid-body: ls and stat through the mount must fail with EIO
// within the I/O timeout (--io-timeout), never hang. The source is made as the mount
// command makes it (sources.Builtin.Open with the --io-timeout), so the flag's wiring is under test too.
func TestMetadataFaultsThroughMountAreEIO(t *testing.T) {
	const (
		ioTimeout = time.Second
		slack     = 1500 * time.Millisecond // -race on a loaded 2-core machine
		hangLimit = 10 * time.Second        // past this the operation counts as hung
	)
	url := startMetaFaultOrigin(t)
	src, err := sources.Builtin.Open(url, sources.Options{IOTimeout: ioTimeout})
	if err != nil {
		t.Fatal(err)
	}
	opts := testOptions(t)
	opts.Fetch.IOTimeout = ioTimeout
	opts.ListTTL = -1 // every ls asks the origin
	m := mountSource(t, src, opts)

	ls := func(p string) error { _, err := os.ReadDir(p); return err }
	stat := func(p string) error { _, err := os.Stat(p); return err }
	cases := []struct {
		name string
		op   func(string) error
		path string
	}{
		{"ls, silent after headers", ls, "hdr"},
		{"ls, silent mid-body", ls, "mid"},
		{"ls, reset mid-body", ls, "rst"},
		{"stat in a listing silent after headers", stat, "hdr/x.bin"},
		{"stat in a listing silent mid-body", stat, "mid/x.bin"},
		{"stat in a listing reset mid-body", stat, "rst/x.bin"},
		{"stat, HEAD never answered", stat, "nosize.bin"},
	}
	var slowest time.Duration
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- c.op(filepath.Join(m.Dir, c.path)) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(hangLimit):
				t.Fatalf("%s still blocked after %v (I/O timeout %v)", c.path, hangLimit, ioTimeout)
			}
			took := time.Since(start)
			slowest = max(slowest, took)
			t.Logf("%s: %v after %v", c.path, err, took.Round(time.Millisecond))
			if !errors.Is(err, syscall.EIO) {
				t.Errorf("%s: %v, want EIO", c.path, err)
			}
			if took > ioTimeout+slack {
				t.Errorf("%s took %v, bound %v", c.path, took, ioTimeout+slack)
			}
		})
	}
	if names, err := readDirNames(m.Dir); err != nil || strings.Join(names, " ") != "hdr mid nosize.bin rst" {
		t.Errorf("the root still lists %q, %v after the faults", names, err)
	}
	figure(t, "%d metadata faults (listing silent after headers, silent mid-body, reset mid-body; HEAD never answered) "+
		"through the mount: each EIO, slowest after %v (I/O timeout %v)", len(cases), slowest.Round(time.Millisecond), ioTimeout)
}
