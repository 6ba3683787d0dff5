package objstore

// These tests check what the package comment tells the source implementation: that
// gocloud.dev/blob reaches each emulator with Params and Env, both through
// blob.OpenBucket's URL form and through SDK clients built from the settings, and
// which gcerrors code each failure maps to. Lines starting "FINDING" in -v output are
// the measured behaviour.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	azblobblob "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcerrors"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
)

// openURL opens bucket with blob.OpenBucket's URL form; the credentials come from the
// process environment (Server.SetEnv).
func openURL(ctx context.Context, s *Server, bucket string) (*blob.Bucket, error) {
	return blob.OpenBucket(ctx, gocloudURL(s.Kind(), s.Params(), bucket))
}

// gocloudURL is the blob.OpenBucket URL that reaches the server of params.
func gocloudURL(kind Kind, params map[string]string, bucket string) string {
	switch kind {
	case S3:
		q := url.Values{"endpoint": {params["s3-endpoint"]}, "region": {params["s3-region"]}, "use_path_style": {params["s3-path-style"]}}
		return "s3://" + bucket + "?" + q.Encode()
	case Azure:
		// domain is host:port; azureblob builds http://DOMAIN/ACCOUNT (localemu=true puts
		// the account in the path, as Azurite wants).
		u, err := url.Parse(params["azure-endpoint"])
		if err != nil {
			panic(err)
		}
		q := url.Values{"localemu": {"true"}, "domain": {u.Host}, "protocol": {u.Scheme}, "storage_account": {params["azure-account"]}}
		return "azblob://" + bucket + "?" + q.Encode()
	default:
		return "gs://" + bucket // endpoint: STORAGE_EMULATOR_HOST
	}
}

// openClient opens bucket on gocloud.dev/blob through an SDK client built from params
// and env alone (not the process environment): what a source given --s3-endpoint etc.
// does.
func openClient(ctx context.Context, kind Kind, params, env map[string]string, bucket string) (*blob.Bucket, error) {
	switch kind {
	case S3:
		cfg, err := config.LoadDefaultConfig(ctx,
			config.WithRegion(params["s3-region"]),
			config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], "")))
		if err != nil {
			return nil, err
		}
		c := s3.NewFromConfig(cfg, func(o *s3.Options) {
			o.BaseEndpoint = aws.String(params["s3-endpoint"])
			o.UsePathStyle = params["s3-path-style"] == "true"
		})
		return s3blob.OpenBucket(ctx, c, bucket, nil)
	case Azure:
		cred, err := azblob.NewSharedKeyCredential(params["azure-account"], env["AZURE_STORAGE_KEY"])
		if err != nil {
			return nil, err
		}
		cc, err := container.NewClientWithSharedKeyCredential(params["azure-endpoint"]+"/"+bucket, cred, nil)
		if err != nil {
			return nil, err
		}
		return azureblob.OpenBucket(ctx, cc, nil)
	default:
		c, err := storage.NewClient(ctx, option.WithEndpoint(params["gcs-endpoint"]+"/storage/v1/"), option.WithoutAuthentication())
		if err != nil {
			return nil, err
		}
		return gcsblob.OpenBucket(ctx, nil, bucket, &gcsblob.Options{Client: c})
	}
}

// ifMatch returns reader options that make the read fail once the object no longer is
// the one attrs describe.
func ifMatch(kind Kind, attrs *blob.Attributes) (*blob.ReaderOptions, error) {
	switch kind {
	case S3:
		etag := attrs.ETag
		return &blob.ReaderOptions{BeforeRead: func(as func(any) bool) error {
			var in *s3.GetObjectInput
			if !as(&in) {
				return errors.New("not *s3.GetObjectInput")
			}
			in.IfMatch = aws.String(etag)
			return nil
		}}, nil
	case Azure:
		etag := azcore.ETag(attrs.ETag)
		return &blob.ReaderOptions{BeforeRead: func(as func(any) bool) error {
			var o *azblobblob.DownloadStreamOptions
			if !as(&o) {
				return errors.New("not *blob.DownloadStreamOptions")
			}
			o.AccessConditions = &azblobblob.AccessConditions{ModifiedAccessConditions: &azblobblob.ModifiedAccessConditions{IfMatch: &etag}}
			return nil
		}}, nil
	default:
		gen, err := generation(attrs)
		if err != nil {
			return nil, err
		}
		return &blob.ReaderOptions{BeforeRead: func(as func(any) bool) error {
			var oh **storage.ObjectHandle
			if !as(&oh) {
				return errors.New("not **storage.ObjectHandle")
			}
			*oh = (*oh).If(storage.Conditions{GenerationMatch: gen})
			return nil
		}}, nil
	}
}

// pinGeneration returns GCS reader options that read the generation attrs describe.
func pinGeneration(attrs *blob.Attributes) (*blob.ReaderOptions, error) {
	gen, err := generation(attrs)
	if err != nil {
		return nil, err
	}
	return &blob.ReaderOptions{BeforeRead: func(as func(any) bool) error {
		var oh **storage.ObjectHandle
		if !as(&oh) {
			return errors.New("not **storage.ObjectHandle")
		}
		*oh = (*oh).Generation(gen)
		return nil
	}}, nil
}

func generation(attrs *blob.Attributes) (int64, error) {
	var oa storage.ObjectAttrs
	if !attrs.As(&oa) {
		return 0, errors.New("attributes are not storage.ObjectAttrs")
	}
	return oa.Generation, nil
}

func readAll(ctx context.Context, b *blob.Bucket, key string, off, n int64, opts *blob.ReaderOptions) ([]byte, error) {
	r, err := b.NewRangeReader(ctx, key, off, n, opts)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func code(err error) string {
	if err == nil {
		return "no error"
	}
	c := gcerrors.Code(err).String()
	if st := httpStatus(err); st != 0 {
		c += fmt.Sprintf(" (HTTP %d)", st)
	}
	return c
}

// httpStatus digs the HTTP status out of an SDK error, 0 if there is none.
func httpStatus(err error) int {
	var ae *awshttp.ResponseError
	var ze *azcore.ResponseError
	var ge *googleapi.Error
	switch {
	case errors.As(err, &ae):
		return ae.HTTPStatusCode()
	case errors.As(err, &ze):
		return ze.StatusCode
	case errors.As(err, &ge):
		return ge.Code
	}
	return 0
}

func testData(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

// TestGocloud opens each emulator's bucket through gocloud.dev/blob, both ways, and
// does a ranged read, an attribute read, a listing with a delimiter and a conditional
// read that must fail once the object is replaced; then reads a missing object and a
// missing bucket.
func TestGocloud(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(string(kind), func(t *testing.T) {
			s := Start(t, kind)
			for _, how := range []string{"url", "client"} {
				t.Run(how, func(t *testing.T) {
					open := func(ctx context.Context, bucket string) (*blob.Bucket, error) {
						return openClient(ctx, kind, s.Params(), s.Env(), bucket)
					}
					if how == "url" {
						s.SetEnv(t)
						t.Logf("FINDING %s url: %s", kind, gocloudURL(kind, s.Params(), "BUCKET"))
						open = func(ctx context.Context, bucket string) (*blob.Bucket, error) { return openURL(ctx, s, bucket) }
					}
					exercise(t, s, open)
				})
			}
		})
	}
}

func exercise(t *testing.T, s *Server, open func(ctx context.Context, bucket string) (*blob.Bucket, error)) {
	kind := s.Kind()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	sb := s.NewBucket(t)
	data := testData(4096, 1)
	sb.Put(t, "dir/a.bin", data)
	sb.Put(t, "dir/sub/b.bin", []byte("b"))
	sb.Put(t, "top.bin", []byte("top"))
	b, err := open(ctx, sb.Name)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer b.Close()

	got, err := readAll(ctx, b, "dir/a.bin", 100, 50, nil)
	if err != nil || !bytes.Equal(got, data[100:150]) {
		t.Fatalf("ranged read: %v (%d bytes)", err, len(got))
	}
	attrs, err := b.Attributes(ctx, "dir/a.bin")
	if err != nil {
		t.Fatalf("attributes: %v", err)
	}
	if attrs.Size != int64(len(data)) || attrs.ETag == "" || attrs.ModTime.IsZero() {
		t.Errorf("attributes: size %d etag %q mtime %v", attrs.Size, attrs.ETag, attrs.ModTime)
	}
	var names []string
	it := b.List(&blob.ListOptions{Prefix: "dir/", Delimiter: "/"})
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		names = append(names, fmt.Sprintf("%s:%v:%d", o.Key, o.IsDir, o.Size))
	}
	if want := "dir/a.bin:false:4096 dir/sub/:true:0"; strings.Join(names, " ") != want {
		t.Errorf("list = %q, want %q", strings.Join(names, " "), want)
	}

	// Conditional read: fine while the object is the one of attrs, refused once replaced.
	cond, err := ifMatch(kind, attrs)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := readAll(ctx, b, "dir/a.bin", 0, 10, cond); err != nil || !bytes.Equal(got, data[:10]) {
		t.Fatalf("conditional read of the same object: %v", err)
	}
	sb.Put(t, "dir/a.bin", testData(4096, 2))
	got, err = readAll(ctx, b, "dir/a.bin", 0, 10, cond)
	t.Logf("FINDING %s: conditional read (If-Match/GenerationMatch) after replace: %s (%v)", kind, code(err), err)
	switch {
	case kind == GCS && err == nil:
		// fake-gcs-server ignores read preconditions (ifGenerationMatch /
		// x-goog-if-generation-match) and serves the new object; real GCS answers 412.
		if bytes.Equal(got, data[:10]) {
			t.Errorf("GCS: conditional read after replace returned the old data")
		}
		// What does detect it on both: the generation the read was served from
		// (X-Goog-Generation), in the *storage.Reader.
		gen, err := generation(attrs)
		if err != nil {
			t.Fatal(err)
		}
		var served int64
		_, err = readAll(ctx, b, "dir/a.bin", 0, 10, &blob.ReaderOptions{BeforeRead: func(as func(any) bool) error {
			var r *storage.Reader
			if !as(&r) {
				return errors.New("not *storage.Reader")
			}
			served = r.Attrs.Generation
			return nil
		}})
		t.Logf("FINDING %s: read after replace is served from generation %d, stat said %d", kind, served, gen)
		if err != nil || served == gen || served == 0 {
			t.Errorf("GCS: read after replace: generation %d (stat: %d), %v", served, gen, err)
		}
		pin, err := pinGeneration(attrs)
		if err != nil {
			t.Fatal(err)
		}
		_, err = readAll(ctx, b, "dir/a.bin", 0, 10, pin)
		t.Logf("FINDING %s: read pinned to the old generation after replace: %s (%v)", kind, code(err), err)
		if gcerrors.Code(err) != gcerrors.NotFound {
			t.Errorf("GCS: read of the replaced generation: %v, want NotFound", err)
		}
	case gcerrors.Code(err) != gcerrors.FailedPrecondition:
		t.Errorf("conditional read after replace: %v, want FailedPrecondition", err)
	}

	_, err = b.Attributes(ctx, "dir/missing")
	t.Logf("FINDING %s: attributes of a missing object: %s", kind, code(err))
	if gcerrors.Code(err) != gcerrors.NotFound {
		t.Errorf("missing object attributes: %v, want NotFound", err)
	}
	_, err = readAll(ctx, b, "dir/missing", 0, -1, nil)
	t.Logf("FINDING %s: read of a missing object: %s", kind, code(err))
	if gcerrors.Code(err) != gcerrors.NotFound {
		t.Errorf("missing object read: %v, want NotFound", err)
	}

	nb, err := open(ctx, "phnosuchbucket"+randHex(4))
	if err != nil {
		t.Logf("FINDING %s: open of a missing bucket: %s (%v)", kind, code(err), err)
		return
	}
	defer nb.Close()
	_, err = nb.Attributes(ctx, "dir/a.bin")
	t.Logf("FINDING %s: open of a missing bucket succeeds; attributes then: %s", kind, code(err))
	if gcerrors.Code(err) != gcerrors.NotFound {
		t.Errorf("missing bucket attributes: %v, want NotFound", err)
	}
	_, err = nb.List(&blob.ListOptions{Delimiter: "/"}).Next(ctx)
	t.Logf("FINDING %s: missing bucket, first listing: %s (%v)", kind, code(err), err)
	if gcerrors.Code(err) != gcerrors.NotFound {
		t.Errorf("missing bucket listing: %v, want NotFound", err)
	}
	exists, err := nb.IsAccessible(ctx)
	t.Logf("FINDING %s: missing bucket, IsAccessible: %v, %s", kind, exists, code(err))
}

// TestGocloudWrongSecret checks what a wrong secret gives (S3 and Azure; the GCS
// emulator checks no credentials).
func TestGocloudWrongSecret(t *testing.T) {
	for _, kind := range []Kind{S3, Azure} {
		t.Run(string(kind), func(t *testing.T) {
			s := Start(t, kind)
			sb := s.NewBucket(t)
			sb.Put(t, "k", []byte("data"))
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			b, err := openClient(ctx, kind, s.Params(), s.WrongEnv(), sb.Name)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer b.Close()
			began := time.Now()
			_, err = b.Attributes(ctx, "k")
			t.Logf("FINDING %s wrong secret: attributes: %s in %v (%v)", kind, code(err), time.Since(began).Round(time.Millisecond), err)
			if httpStatus(err) != 403 {
				t.Errorf("attributes with a wrong secret: %v, want HTTP 403", err)
			}
			_, err = readAll(ctx, b, "k", 0, -1, nil)
			t.Logf("FINDING %s wrong secret: read: %s (%v)", kind, code(err), err)
			if httpStatus(err) != 403 {
				t.Errorf("read with a wrong secret: %v, want HTTP 403", err)
			}
			_, err = b.List(&blob.ListOptions{Delimiter: "/"}).Next(ctx)
			t.Logf("FINDING %s wrong secret: list: %s (%v)", kind, code(err), err)
			if httpStatus(err) != 403 {
				t.Errorf("list with a wrong secret: %v, want HTTP 403", err)
			}
			ok, err := b.IsAccessible(ctx)
			t.Logf("FINDING %s wrong secret: IsAccessible: %v, %s (%v)", kind, ok, code(err), err)
		})
	}
}

// TestGocloudThrottled measures how long each SDK, with its defaults, takes to get
// through one throttling refusal.
func TestGocloudThrottled(t *testing.T) {
	for _, kind := range Kinds {
		t.Run(string(kind), func(t *testing.T) {
			s := Start(t, kind)
			sb := s.NewBucket(t)
			sb.Put(t, "k", []byte("data"))
			params, refused := s.Throttled(t, 1)
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			b, err := openClient(ctx, kind, params, s.Env(), sb.Name)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			defer b.Close()
			began := time.Now()
			got, err := readAll(ctx, b, "k", 0, -1, nil)
			t.Logf("FINDING %s throttled once: read %q, %v after %v, %d refused", kind, got, err, time.Since(began).Round(time.Millisecond), refused())
			if err != nil || string(got) != "data" || refused() != 1 {
				t.Errorf("read through one refusal: %q, %v, refused %d", got, err, refused())
			}
		})
	}
}

// TestGocloudUnreachable measures what an endpoint that refuses connections, and one
// that accepts them and never answers, give, and how long they take with each SDK's
// defaults (bounded here by a 15 s context: with the AWS SDK a refused connection fails
// after 3 attempts in about 1 s, with azcore after 4 tries in about 10 s; the GCS client
// retries until the context ends, and no SDK times out a silent server by itself).
func TestGocloudUnreachable(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for SDK retries")
	}
	refused, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 100)
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() {
		silent.Close()
		for {
			select {
			case c := <-accepted:
				c.Close()
			default:
				return
			}
		}
	})
	env := map[Kind]map[string]string{
		S3:    {"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "secret"},
		Azure: {"AZURE_STORAGE_ACCOUNT": AzuriteAccount, "AZURE_STORAGE_KEY": AzuriteKey},
		GCS:   {},
	}
	for _, kind := range Kinds {
		for _, c := range []struct{ name, addr string }{
			{"refused", fmt.Sprintf("127.0.0.1:%d", refused)},
			{"silent", silent.Addr().String()},
		} {
			t.Run(string(kind)+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				s := &Server{kind: kind, addr: c.addr, endpoint: "http://" + c.addr}
				if kind == Azure {
					s.endpoint += "/" + AzuriteAccount
				}
				ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
				defer cancel()
				b, err := openClient(ctx, kind, s.Params(), env[kind], "bucket")
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				defer b.Close()
				began := time.Now()
				_, err = b.Attributes(ctx, "k")
				took := time.Since(began).Round(100 * time.Millisecond)
				t.Logf("FINDING %s %s endpoint: attributes: %s after %v, context done: %v (%v)", kind, c.name, code(err), took, ctx.Err() != nil, err)
				if err == nil {
					t.Error("no error")
				}
			})
		}
	}
}
