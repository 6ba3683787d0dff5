package blobsrc

import (
	"context"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/playhead/playhead/source"
)

// Azure reads go to the Azure SDK directly, listings through gocloud.dev. gocloud.dev's
// azureblob hex-escapes '#', '%' and '?' in keys ("100%.mkv" becomes "100__0x25__.mkv")
// so that the keys it writes can be addressed; an object another tool wrote under the
// real name is then listed but never found (the conformance suite's odd names showed
// it on Azurite). The SDK's blob client URL-encodes the name as it is.

// useAzureSDK makes s read Azure objects through c. Call it before the first read.
func (s *Source) useAzureSDK(c *container.Client) { s.az = c }

// attributes returns the version of the object key.
func (s *Source) attributes(ctx context.Context, key string) (source.Version, error) {
	if s.az == nil {
		a, err := s.bucket.Attributes(ctx, key)
		if err != nil {
			return source.Version{}, err
		}
		return s.attrsVersion(a), nil
	}
	p, err := s.az.NewBlobClient(key).GetProperties(ctx, nil)
	if err != nil {
		return source.Version{}, err
	}
	return azVersion(p.ContentLength, nil, p.LastModified, p.ETag), nil
}

// azOpen GETs [off, off+n) of key (n < 0: to the end), If-Match want's ETag.
func (s *Source) azOpen(ctx context.Context, key string, off, n int64, want source.Version) (io.ReadCloser, source.Version, error) {
	opts := &azblobblob.DownloadStreamOptions{Range: azblobblob.HTTPRange{Offset: off}}
	if n >= 0 {
		opts.Range.Count = max(n, 1) // Count 0 means to the end; a zero-length body reads nothing
	}
	if want.ETag != "" && !strings.HasPrefix(want.ETag, "W/") {
		tag := azcore.ETag(want.ETag)
		opts.AccessConditions = &azblobblob.AccessConditions{
			ModifiedAccessConditions: &azblobblob.ModifiedAccessConditions{IfMatch: &tag}}
	}
	resp, err := s.az.NewBlobClient(key).DownloadStream(ctx, opts)
	if err != nil {
		return nil, source.Version{}, err
	}
	return resp.Body, azVersion(resp.ContentLength, resp.ContentRange, resp.LastModified, resp.ETag), nil
}

// azVersion is the object's version from an answer's headers: the size is the total of
// Content-Range when there is one (a ranged answer), else Content-Length.
func azVersion(length *int64, contentRange *string, mod *time.Time, tag *azcore.ETag) source.Version {
	size := int64(-1)
	if length != nil {
		size = *length
	}
	if contentRange != nil {
		if _, total, ok := strings.Cut(*contentRange, "/"); ok {
			if v, err := strconv.ParseInt(total, 10, 64); err == nil {
				size = v
			}
		}
	}
	var t time.Time
	if mod != nil {
		t = *mod
	}
	etag := ""
	if tag != nil {
		etag = quote(string(*tag))
	}
	return version(size, t, etag)
}
