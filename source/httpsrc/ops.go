package httpsrc

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/playhead/playhead/source"
)

// maxListingBytes bounds a listing body: a directory of 100k entries is about 20 MiB of
// nginx HTML; anything much larger is not a listing we should hold in memory.
const maxListingBytes = 64 << 20

// Stat implements source.Source with a HEAD of the path. A path whose URL redirects to its
// slash form is a directory; Stat("") is the root directory without asking the origin.
func (s *Source) Stat(ctx context.Context, p string) (source.Entry, error) {
	fail := func(err error) (source.Entry, error) {
		return source.Entry{}, &source.PathError{Op: "stat", Path: p, Off: -1, Err: err}
	}
	if err := s.resolve(ctx); err != nil {
		return fail(err)
	}
	if p == "" {
		return source.Entry{Name: rootName, IsDir: true, Version: source.AnyVersion}, nil
	}
	u, err := s.fileURL(p)
	if err != nil {
		return fail(err)
	}
	resp, err := s.head(ctx, u)
	if err != nil {
		return fail(err)
	}
	resp.Body.Close()
	name := p[strings.LastIndexByte(p, '/')+1:]
	if redirectedToDir(resp, u) {
		return source.Entry{Name: name, IsDir: true, Version: source.AnyVersion}, nil
	}
	if resp.StatusCode/100 != 2 {
		return fail(statusError(resp))
	}
	v := versionOf(resp)
	if v.Size < 0 {
		if v, err = s.sizeByRange(ctx, u, v); err != nil {
			return fail(err)
		}
	}
	return source.Entry{Name: name, Version: v}, nil
}

// List implements source.Source: a GET of the directory URL (trailing slash), preferring
// nginx's JSON listing, which has exact sizes and times.
func (s *Source) List(ctx context.Context, p string) ([]source.Entry, error) {
	fail := func(err error) ([]source.Entry, error) {
		return nil, &source.PathError{Op: "list", Path: p, Off: -1, Err: err}
	}
	if err := s.resolve(ctx); err != nil {
		return fail(err)
	}
	if isFile, name, v := s.isFileSource(); isFile {
		switch p {
		case "":
			return []source.Entry{{Name: name, Version: v}}, nil
		case name:
			return fail(source.ErrNotDir)
		}
		return fail(source.ErrNotFound)
	}
	u, err := s.dirURL(p)
	if err != nil {
		return fail(err)
	}
	resp, err := s.metaDo(ctx, http.MethodGet, u, func(req *http.Request) {
		req.Header.Set("Accept", "application/json, text/html;q=0.9")
	})
	if err != nil {
		return fail(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fail(statusError(resp))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxListingBytes+1))
	if err != nil {
		return fail(fmt.Errorf("reading listing: %w", err))
	}
	if len(body) > maxListingBytes {
		return fail(fmt.Errorf("listing larger than %d bytes", maxListingBytes))
	}
	entries, err := parseListing(resp.Request.URL, resp.Header.Get("Content-Type"), body)
	if err != nil {
		return fail(err)
	}
	return entries, nil
}
