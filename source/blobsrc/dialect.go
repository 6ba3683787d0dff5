package blobsrc

import (
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"gocloud.dev/blob"

	"github.com/playhead/playhead/source"
)

// Each cloud names an object's version differently: S3 and Azure by a strong ETag,
// GCS by a generation number. Both go in source.Version.ETag, quoted, so the engine
// compares them alike: a GCS generation 17 is the tag "17". They are read from the
// SDK's own types through gocloud.dev's As, because its portable types carry no
// generation and, in listings, no ETag.

// quote normalizes an entity tag: Azure's listing gives it bare, its headers quoted.
func quote(tag string) string {
	if tag == "" {
		return ""
	}
	return `"` + strings.Trim(tag, `"`) + `"`
}

func generationTag(gen int64) string {
	if gen == 0 {
		return ""
	}
	return quote(strconv.FormatInt(gen, 10))
}

// version builds a Version with the time cut to whole seconds (see the package doc).
func version(size int64, mod time.Time, tag string) source.Version {
	return source.Version{Size: size, ModTime: mod.Truncate(time.Second), ETag: tag}
}

func (s *Source) listVersion(o *blob.ListObject) source.Version {
	tag := ""
	switch s.kind {
	case S3:
		var obj s3types.Object
		if o.As(&obj) {
			tag = quote(aws.ToString(obj.ETag))
		}
	case Azure:
		var item container.BlobItem
		if o.As(&item) && item.Properties != nil && item.Properties.ETag != nil {
			tag = quote(string(*item.Properties.ETag))
		}
	case GCS:
		var attrs storage.ObjectAttrs
		if o.As(&attrs) {
			tag = generationTag(attrs.Generation)
		}
	}
	return version(o.Size, o.ModTime, tag)
}

func (s *Source) attrsVersion(a *blob.Attributes) source.Version {
	tag := quote(a.ETag)
	if s.kind == GCS {
		tag = ""
		var attrs storage.ObjectAttrs
		if a.As(&attrs) {
			tag = generationTag(attrs.Generation)
		}
	}
	return version(a.Size, a.ModTime, tag)
}

func (s *Source) readerVersion(r *blob.Reader) source.Version {
	tag := ""
	switch s.kind {
	case S3:
		var out s3.GetObjectOutput
		if r.As(&out) {
			tag = quote(aws.ToString(out.ETag))
		}
	case Azure:
		var resp azblobblob.DownloadStreamResponse
		if r.As(&resp) && resp.ETag != nil {
			tag = quote(string(*resp.ETag))
		}
	case GCS:
		var sr *storage.Reader
		if r.As(&sr) {
			tag = generationTag(sr.Attrs.Generation)
		}
	}
	return version(r.Size(), r.ModTime(), tag)
}

// condition makes a GET conditional on want's tag: If-Match for S3 and Azure, a
// generation match for GCS. Without a tag the GET is unconditional and OpenRange
// compares the answer's version instead.
func (s *Source) condition(want source.Version) func(as func(any) bool) error {
	if want.ETag == "" || strings.HasPrefix(want.ETag, "W/") {
		return nil
	}
	return func(as func(any) bool) error {
		switch s.kind {
		case S3:
			var in *s3.GetObjectInput
			if as(&in) {
				in.IfMatch = aws.String(want.ETag)
			}
		case Azure:
			var o *azblobblob.DownloadStreamOptions
			if as(&o) {
				tag := azcore.ETag(want.ETag)
				if o.AccessConditions == nil {
					o.AccessConditions = &azblobblob.AccessConditions{}
				}
				if o.AccessConditions.ModifiedAccessConditions == nil {
					o.AccessConditions.ModifiedAccessConditions = &azblobblob.ModifiedAccessConditions{}
				}
				o.AccessConditions.ModifiedAccessConditions.IfMatch = &tag
			}
		case GCS:
			gen, err := strconv.ParseInt(strings.Trim(want.ETag, `"`), 10, 64)
			var oh **storage.ObjectHandle
			if err == nil && as(&oh) {
				*oh = (*oh).If(storage.Conditions{GenerationMatch: gen})
			}
		}
		return nil
	}
}
