package blobsrc

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"net/http"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/logging"
	"github.com/playhead/playhead/source/internal/spare"
	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/blob/s3blob"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"
)

// Options are the settings of a bucket source besides its URL. Credentials are not
// among them: each cloud's SDK finds its own (environment, shared config files,
// instance or workload identity), and nothing here ever logs them.
type Options struct {
	// Timeout bounds each metadata request and the wait for a range's first byte.
	Timeout time.Duration
	// Endpoint is the service URL, for S3-compatible servers (MinIO), Azurite or a GCS
	// emulator; empty means the cloud's own.
	Endpoint string
	// Region is the S3 region; empty means the SDK's chain (AWS_REGION, ~/.aws/config),
	// else us-east-1.
	Region string
	// PathStyle addresses S3 buckets as ENDPOINT/bucket rather than bucket.ENDPOINT, as
	// most S3-compatible servers need.
	PathStyle bool
	// NoSign sends S3 requests unsigned, for public buckets.
	NoSign bool
	// Account is the Azure storage account; empty means AZURE_STORAGE_ACCOUNT.
	Account string
	// Log receives warnings about keys that cannot be file names (nil: slog.Default()).
	Log *slog.Logger
}

// ParseURL splits "s3://bucket/some/prefix" into its kind, bucket and prefix.
func ParseURL(spec string) (Kind, string, string, error) {
	var kind Kind
	for _, k := range []Kind{S3, Azure, GCS} {
		if strings.HasPrefix(spec, string(k)+"://") {
			kind = k
		}
	}
	if kind == "" {
		return "", "", "", fmt.Errorf("playhead: %q is not an s3://, azblob:// or gs:// URL", spec)
	}
	rest := strings.TrimPrefix(spec, string(kind)+"://")
	if strings.ContainsAny(rest, "?#") {
		return "", "", "", fmt.Errorf("playhead: %q: bucket URLs take no query or fragment; give settings as --%s-... flags", spec, flagPrefix(kind))
	}
	bucket, prefix, _ := strings.Cut(rest, "/")
	if bucket == "" || strings.ContainsAny(bucket, " \\\x00") {
		return "", "", "", fmt.Errorf("playhead: %q: want %s://BUCKET/PREFIX with a bucket name", spec, kind)
	}
	prefix = strings.Trim(prefix, "/")
	if prefix != "" && !validPath(prefix) {
		return "", "", "", fmt.Errorf("playhead: %q: the prefix %q has an empty, \".\" or \"..\" segment", spec, prefix)
	}
	return kind, bucket, prefix, nil
}

func flagPrefix(k Kind) string {
	switch k {
	case Azure:
		return "azure"
	case GCS:
		return "gcs"
	}
	return "s3"
}

// Open returns the source for a bucket URL. It does no I/O: wrong credentials, a missing
// bucket or an unreachable endpoint show at Probe, which a mount calls first.
func Open(spec string, o Options) (*Source, error) {
	kind, bucketName, prefix, err := ParseURL(spec)
	if err != nil {
		return nil, err
	}
	shownEndpoint := ""
	if o.Endpoint != "" {
		u, err := url.Parse(o.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("playhead: --%s-endpoint %q: want an http:// or https:// URL", flagPrefix(kind), redact(o.Endpoint))
		}
		shownEndpoint = u.Redacted()
	}
	ctx := context.Background()
	var src *Source
	spares := spare.New(func(ctx context.Context) error { return src.warmHead(ctx) })
	tr := newTransport(spares, o.timeout())
	hc := &http.Client{Transport: tr}
	var b *blob.Bucket
	switch kind {
	case S3:
		b, err = openS3(ctx, bucketName, o, tr)
	case Azure:
		b, err = openAzure(ctx, bucketName, o, hc)
	case GCS:
		b, err = openGCS(ctx, bucketName, o, hc)
	}
	if err != nil {
		return nil, fmt.Errorf("playhead: %s: %w", spec, err)
	}
	name := string(kind) + "://" + bucketName + "/" + prefix
	if shownEndpoint != "" {
		name += " at " + shownEndpoint // logs and errors show it: never a password
	}
	src = NewFromBucket(b, kind, name, prefix, o.Timeout, o.Log)
	src.spares = spares
	if kind == Azure {
		var c *container.Client
		if !b.As(&c) {
			return nil, fmt.Errorf("playhead: %s: no Azure container client", spec)
		}
		src.useAzureSDK(c)
	}
	return src, nil
}

// redact hides a password in a URL that does not parse as one.
func redact(raw string) string {
	if at := strings.LastIndexByte(raw, '@'); at >= 0 {
		if i := strings.Index(raw, "://"); i >= 0 && i < at {
			return raw[:i+3] + "xxxxx" + raw[at:]
		}
	}
	return raw
}

// log is Log, or slog.Default().
func (o Options) log() *slog.Logger {
	if o.Log == nil {
		return slog.Default()
	}
	return o.Log
}

// timeout is Timeout, or the default when zero.
func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return defaultTimeout
	}
	return o.Timeout
}

func openS3(ctx context.Context, bucket string, o Options, tr *http.Transport) (*blob.Bucket, error) {
	// The SDK's own buildable client, with our transport's settings: it adds the CA
	// bundle of AWS_CA_BUNDLE to it, which a plain http.Client would refuse.
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		roots := t.TLSClientConfig
		*t = *tr.Clone()
		if roots != nil && roots.RootCAs != nil {
			t.TLSClientConfig.RootCAs = roots.RootCAs
		}
	})
	opts := []func(*config.LoadOptions) error{
		config.WithHTTPClient(hc),
		// The SDK's own log lines ("falling back to IMDSv1") go to ours at debug level,
		// not to stderr. Request and response logging stays off, so no signature or key
		// is ever written.
		config.WithLogger(logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
			o.log().Debug("aws sdk: "+fmt.Sprintf(format, v...), "class", string(c))
		})),
		// Retries with backoff on throttling and server errors are the SDK's standard
		// ones; its client-side retry quota is off, as in gocloud.dev, because the
		// fetcher bounds and retries reads itself.
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(so *retry.StandardOptions) { so.RateLimiter = ratelimit.None })
		}),
		// Ranged GETs carry no whole-object checksum; the cache checks every block.
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
	}
	if o.Region != "" {
		opts = append(opts, config.WithRegion(o.Region))
	}
	if o.NoSign {
		opts = append(opts, config.WithCredentialsProvider(aws.AnonymousCredentials{}))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		so.UsePathStyle = o.PathStyle
		so.DisableLogOutputChecksumValidationSkipped = true
	})
	return s3blob.OpenBucket(ctx, client, bucket, nil)
}

// openAzure picks the credential as gocloud.dev's default client does (shared key,
// SAS token, connection string, else an Azure identity), with the account and endpoint
// from the options first.
func openAzure(ctx context.Context, containerName string, o Options, hc *http.Client) (*blob.Bucket, error) {
	co := &container.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: hc}}
	account := o.Account
	if account == "" {
		account = os.Getenv("AZURE_STORAGE_ACCOUNT")
	}
	svc := strings.TrimSuffix(o.Endpoint, "/")
	if svc == "" {
		if account == "" {
			return nil, fmt.Errorf("no storage account: give --azure-account or set AZURE_STORAGE_ACCOUNT")
		}
		svc = "https://" + account + ".blob.core.windows.net"
	}
	containerURL := svc + "/" + containerName
	var (
		client *container.Client
		err    error
	)
	key, sas := os.Getenv("AZURE_STORAGE_KEY"), os.Getenv("AZURE_STORAGE_SAS_TOKEN")
	connStr := os.Getenv("AZURE_STORAGE_CONNECTION_STRING")
	switch {
	case key != "" && account != "":
		var cred *azblob.SharedKeyCredential
		if cred, err = azblob.NewSharedKeyCredential(account, key); err == nil {
			client, err = container.NewClientWithSharedKeyCredential(containerURL, cred, co)
		}
	case sas != "":
		client, err = container.NewClientWithNoCredential(containerURL+"?"+strings.TrimPrefix(sas, "?"), co)
	case connStr != "" && o.Endpoint == "":
		client, err = container.NewClientFromConnectionString(connStr, containerName, co)
	default:
		var cred *azidentity.DefaultAzureCredential
		if cred, err = azidentity.NewDefaultAzureCredential(nil); err == nil {
			client, err = container.NewClient(containerURL, cred, co)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("Azure credentials: %w", err)
	}
	return azureblob.OpenBucket(ctx, client, nil)
}

// openGCS uses Application Default Credentials; with none found (a public bucket), or
// with an endpoint and no GOOGLE_APPLICATION_CREDENTIALS (an emulator), it reads
// unauthenticated.
func openGCS(ctx context.Context, bucket string, o Options, hc *http.Client) (*blob.Bucket, error) {
	var opts []option.ClientOption
	if o.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(strings.TrimSuffix(o.Endpoint, "/")+"/storage/v1/"))
	}
	// Our transport under the credentials' own: option.WithHTTPClient alone would send
	// requests unauthenticated.
	client := hc
	if o.Endpoint == "" || os.Getenv("GOOGLE_APPLICATION_CREDENTIALS") != "" {
		if tr, err := htransport.NewTransport(ctx, hc.Transport, option.WithScopes(storage.ScopeReadOnly)); err == nil {
			client = &http.Client{Transport: tr}
		}
	}
	sc, err := storage.NewClient(ctx, append(opts, option.WithHTTPClient(client))...)
	if err != nil {
		return nil, fmt.Errorf("Google Cloud Storage client: %w", err)
	}
	return gcsblob.OpenBucket(ctx, nil, bucket, &gcsblob.Options{Client: sc})
}
