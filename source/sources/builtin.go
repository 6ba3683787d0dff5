package sources

import (
	"fmt"
	"strconv"

	"github.com/playhead/playhead/source"
	"github.com/playhead/playhead/source/blobsrc"
	"github.com/playhead/playhead/source/httpsrc"
	"github.com/playhead/playhead/source/localsrc"
)

// The schemes of this build. A new backend adds its Scheme here and to Builtin.
var (
	// HTTP reads a directory the server lists (nginx or Apache autoindex, Go's
	// http.FileServer) or a single file, with range requests.
	HTTP = Scheme{
		Name:     "http",
		Prefixes: []string{"http://", "https://"},
		Summary:  "an http(s):// URL",
		Open: func(spec string, o Options) (source.Source, error) {
			ho := httpsrc.DefaultOptions()
			if o.IOTimeout > 0 {
				ho.Timeout = o.IOTimeout
			}
			return httpsrc.New(spec, ho)
		},
	}
	// File reads a local directory, given as a path or a file:// URL.
	File = Scheme{
		Name:     "file",
		Prefixes: []string{"file://"},
		Paths:    true,
		Summary:  "a directory or file:// URL",
		Open:     func(spec string, _ Options) (source.Source, error) { return localsrc.New(spec) },
	}
)

// Object storage: S3-compatible, Azure Blob and Google Cloud Storage buckets, through
// their SDKs (source/blobsrc). Credentials come from each cloud's own chain.
var (
	S3 = Scheme{
		Name:     "s3",
		Prefixes: []string{"s3://"},
		Summary:  "an s3://BUCKET/PREFIX URL",
		Params: []Param{
			{Name: "s3-endpoint", Usage: "S3 service URL, for S3-compatible servers such as MinIO (default: AWS)"},
			{Name: "s3-region", Usage: "S3 region (default: AWS_REGION or ~/.aws/config, else us-east-1)"},
			{Name: "s3-path-style", Default: "false", Bool: true, Usage: "address buckets as ENDPOINT/BUCKET, as most S3-compatible servers need"},
			{Name: "s3-no-sign", Default: "false", Bool: true, Usage: "send unsigned requests, for a public bucket"},
		},
		Open: func(spec string, o Options) (source.Source, error) {
			bo, err := blobOptions(o)
			if err != nil {
				return nil, err
			}
			bo.Endpoint, bo.Region = o.Param("s3-endpoint"), o.Param("s3-region")
			if bo.PathStyle, err = boolParam(o, "s3-path-style"); err != nil {
				return nil, err
			}
			if bo.NoSign, err = boolParam(o, "s3-no-sign"); err != nil {
				return nil, err
			}
			return blobsrc.Open(spec, bo)
		},
	}
	Azure = Scheme{
		Name:     "azure",
		Prefixes: []string{"azblob://"},
		Summary:  "an azblob://CONTAINER/PREFIX URL",
		Params: []Param{
			{Name: "azure-account", Usage: "storage account (default: AZURE_STORAGE_ACCOUNT)"},
			{Name: "azure-endpoint", Usage: "blob service URL, such as Azurite's http://127.0.0.1:10000/devstoreaccount1 (default: https://ACCOUNT.blob.core.windows.net)"},
		},
		Open: func(spec string, o Options) (source.Source, error) {
			bo, err := blobOptions(o)
			if err != nil {
				return nil, err
			}
			bo.Account, bo.Endpoint = o.Param("azure-account"), o.Param("azure-endpoint")
			return blobsrc.Open(spec, bo)
		},
	}
	GCS = Scheme{
		Name:     "gcs",
		Prefixes: []string{"gs://"},
		Summary:  "a gs://BUCKET/PREFIX URL",
		Params: []Param{
			{Name: "gcs-endpoint", Usage: "service URL of a GCS emulator such as fake-gcs-server (default: Google's)"},
		},
		Open: func(spec string, o Options) (source.Source, error) {
			bo, err := blobOptions(o)
			if err != nil {
				return nil, err
			}
			bo.Endpoint = o.Param("gcs-endpoint")
			return blobsrc.Open(spec, bo)
		},
	}
)

func blobOptions(o Options) (blobsrc.Options, error) {
	return blobsrc.Options{Timeout: o.IOTimeout}, nil
}

// boolParam parses a Bool setting, naming the flag when it is not a boolean.
func boolParam(o Options, name string) (bool, error) {
	v := o.Param(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("playhead: --%s=%q: want true or false", name, v)
	}
	return b, nil
}

// Builtin is the registry of every scheme this build opens; the command line builds
// its sources and source flags from it.
var Builtin = mustNew(File, HTTP, S3, Azure, GCS)

func mustNew(schemes ...Scheme) *Registry {
	r, err := New(schemes...)
	if err != nil {
		panic(err)
	}
	return r
}
