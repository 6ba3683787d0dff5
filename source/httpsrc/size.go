package httpsrc

import (
	"context"
	"net/http"
	"net/url"

	"github.com/playhead/playhead/source"
)

// sizeByRange learns the size of a file whose HEAD gave none (a chunked answer, as some
// CDNs, object gateways and filtering proxies send) from the total of a one-byte ranged
// GET's Content-Range ("bytes 0-0/N", or "bytes */0" for an empty file). head is the
// version the HEAD described. When the origin gives no total either, the version keeps
// Size -1 and no error: the file is still listed, and vfs refuses to open it
// (vfs.ErrUnknownSize) rather than guess where it ends.
func (s *Source) sizeByRange(ctx context.Context, u *url.URL, head source.Version) (source.Version, error) {
	resp, err := s.metaDo(ctx, http.MethodGet, u, func(req *http.Request) { req.Header.Set("Range", "bytes=0-0") })
	if err != nil {
		return head, err
	}
	resp.Body.Close() // one byte at most, or a whole body we do not want
	switch resp.StatusCode {
	case http.StatusPartialContent:
		if v := versionOf(resp); v.Size >= 0 {
			return v, nil
		}
	case http.StatusRequestedRangeNotSatisfiable:
		if _, _, total, err := parseContentRange(resp.Header.Get("Content-Range")); err == nil && total >= 0 {
			v := versionOf(resp)
			v.Size = total
			return v, nil
		}
	case http.StatusOK:
		if v := versionOf(resp); v.Size >= 0 {
			return v, nil
		}
	}
	return head, nil
}
