package runner

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestParallelCeilingDeliversAChunkAsItArrives checks that the parallel ceiling's reader
// gets a chunk's first bytes while the rest of the chunk is still on its way: a player
// reading it waits for its first frame, not for 4 MiB. The server sends the first chunk's
// head, then holds the rest until the read has returned; a reader that waited for whole
// chunks would time out here. Every byte read is checked against the file.
func TestParallelCeilingDeliversAChunkAsItArrives(t *testing.T) {
	const size = parallelChunk + parallelChunk/2
	file := make([]byte, size)
	for i := range file {
		file[i] = byte(i * 7 / 5)
	}
	const head = 64 << 10
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var off, last int64
		if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &off, &last); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body := file[off : last+1]
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusPartialContent)
		if off == 0 {
			w.Write(body[:head])
			w.(http.Flusher).Flush()
			<-release
			body = body[head:]
		}
		w.Write(body)
	}))
	defer srv.Close()
	defer close(release)

	h := &httpFS{client: srv.Client(), base: srv.URL + "/", sizes: map[string]int64{"f": size}, mode: modeParallel}
	f, err := h.Open("f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := f.(*httpFile)

	got := make(chan error, 1)
	p := make([]byte, head)
	go func() {
		_, err := r.Read(p)
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first read waited for the whole chunk")
	}
	if !bytes.Equal(p, file[:head]) {
		t.Fatal("the first read's bytes differ from the file's")
	}

	release <- struct{}{}
	rest := make([]byte, size-head)
	for n := 0; n < len(rest); {
		k, err := r.Read(rest[n:min(n+100_000, len(rest))]) // reads that span the chunks' boundary
		if err != nil {
			t.Fatalf("read at %d: %v", head+n, err)
		}
		n += k
	}
	if !bytes.Equal(rest, file[head:]) {
		t.Fatal("the rest's bytes differ from the file's")
	}
	if _, err := r.ReadAt(p[:1], 0); err == nil || !strings.Contains(err.Error(), "out of order") {
		t.Errorf("a read behind the reader: %v, want the out-of-order error", err)
	}
}
