package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"google.golang.org/api/option"
)

// Bucket is a bucket (S3, GCS) or container (Azure) on a Server.
type Bucket struct {
	Name string
	s    *Server
}

// client is what the harness does with a cloud's own SDK.
type client interface {
	createBucket(ctx context.Context, name string) error
	put(ctx context.Context, bucket, key string, data []byte) error
	del(ctx context.Context, bucket, key string) error
	get(ctx context.Context, bucket, key string) ([]byte, error)
}

func (s *Server) sdk(t testing.TB) client {
	t.Helper()
	s.clientOnce.Do(func() { s.client, s.clientErr = s.newClient() })
	if s.clientErr != nil {
		t.Fatalf("objstore: %s client: %v", s.kind, s.clientErr)
	}
	return s.client
}

func (s *Server) newClient() (client, error) { return s.clientFor(s.endpoint) }

// clientFor returns an SDK client for the server at endpoint (the server's, or a
// proxy's in front of it).
func (s *Server) clientFor(endpoint string) (client, error) {
	// Harness requests go straight to the emulator; a short per-try timeout keeps a
	// wedged server from hanging a test.
	hc := &http.Client{Timeout: opTimeout}
	switch s.kind {
	case S3:
		return &s3Client{s3.New(s3.Options{
			BaseEndpoint: aws.String(endpoint),
			Region:       "us-east-1",
			UsePathStyle: true,
			Credentials:  credentials.NewStaticCredentialsProvider(s.user, s.secret, ""),
			HTTPClient:   hc,
		})}, nil
	case Azure:
		cred, err := azblob.NewSharedKeyCredential(s.user, s.secret)
		if err != nil {
			return nil, err
		}
		c, err := azblob.NewClientWithSharedKeyCredential(endpoint, cred, &azblob.ClientOptions{ClientOptions: azcore.ClientOptions{
			Transport: hc,
			Retry:     policy.RetryOptions{MaxRetries: 2, RetryDelay: 100 * time.Millisecond, MaxRetryDelay: time.Second},
		}})
		if err != nil {
			return nil, err
		}
		return azClient{c}, nil
	default:
		c, err := storage.NewClient(context.Background(),
			option.WithEndpoint(endpoint+"/storage/v1/"), option.WithoutAuthentication(), option.WithHTTPClient(hc))
		if err != nil {
			return nil, err
		}
		return gcsClient{c}, nil
	}
}

var bucketSeq atomic.Int64

// NewBucket creates a fresh, uniquely named, empty bucket (container for Azure). The
// name is lower case letters and digits, valid for every cloud.
func (s *Server) NewBucket(t testing.TB) *Bucket {
	t.Helper()
	name := fmt.Sprintf("ph%s%d", randHex(5), bucketSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := s.sdk(t).createBucket(ctx, name); err != nil {
		t.Fatalf("objstore: %s: create bucket %s: %v", s.kind, name, err)
	}
	return &Bucket{Name: name, s: s}
}

// URL returns the playhead source URL of prefix in the bucket: "s3://NAME/prefix",
// "azblob://NAME/prefix" or "gs://NAME/prefix" ("s3://NAME/" for an empty prefix).
func (b *Bucket) URL(prefix string) string {
	return string(b.s.kind) + "://" + b.Name + "/" + prefix
}

// Server returns the server the bucket is on.
func (b *Bucket) Server() *Server { return b.s }

// Put creates or replaces the object key with data.
func (b *Bucket) Put(t testing.TB, key string, data []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := b.s.sdk(t).put(ctx, b.Name, key, data); err != nil {
		t.Fatalf("objstore: %s: put %s/%s: %v", b.s.kind, b.Name, key, err)
	}
}

// Get returns the object key's data, read with the cloud's SDK.
func (b *Bucket) Get(t testing.TB, key string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	data, err := b.s.sdk(t).get(ctx, b.Name, key)
	if err != nil {
		t.Fatalf("objstore: %s: get %s/%s: %v", b.s.kind, b.Name, key, err)
	}
	return data
}

// Delete deletes the object key (deleting a missing object is not an error).
func (b *Bucket) Delete(t testing.TB, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := b.s.sdk(t).del(ctx, b.Name, key); err != nil {
		t.Fatalf("objstore: %s: delete %s/%s: %v", b.s.kind, b.Name, key, err)
	}
}

type s3Client struct{ c *s3.Client }

func (c *s3Client) createBucket(ctx context.Context, name string) error {
	_, err := c.c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name})
	return err
}

func (c *s3Client) put(ctx context.Context, bucket, key string, data []byte) error {
	_, err := c.c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: bytes.NewReader(data)})
	return err
}

func (c *s3Client) del(ctx context.Context, bucket, key string) error {
	_, err := c.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: &key})
	return err
}

func (c *s3Client) get(ctx context.Context, bucket, key string) ([]byte, error) {
	out, err := c.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

type azClient struct{ c *azblob.Client }

func (c azClient) createBucket(ctx context.Context, name string) error {
	_, err := c.c.CreateContainer(ctx, name, nil)
	return err
}

func (c azClient) put(ctx context.Context, bucket, key string, data []byte) error {
	_, err := c.c.UploadBuffer(ctx, bucket, key, data, nil)
	return err
}

func (c azClient) del(ctx context.Context, bucket, key string) error {
	_, err := c.c.DeleteBlob(ctx, bucket, key, nil)
	if err != nil && isStatus(err, http.StatusNotFound) {
		return nil
	}
	return err
}

func (c azClient) get(ctx context.Context, bucket, key string) ([]byte, error) {
	resp, err := c.c.DownloadStream(ctx, bucket, key, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

func isStatus(err error, code int) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == code
}

type gcsClient struct{ c *storage.Client }

func (c gcsClient) createBucket(ctx context.Context, name string) error {
	return c.c.Bucket(name).Create(ctx, "playhead-test", nil)
}

func (c gcsClient) put(ctx context.Context, bucket, key string, data []byte) error {
	w := c.c.Bucket(bucket).Object(key).NewWriter(ctx)
	if _, err := w.Write(data); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

func (c gcsClient) get(ctx context.Context, bucket, key string) ([]byte, error) {
	r, err := c.c.Bucket(bucket).Object(key).NewReader(ctx)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

func (c gcsClient) del(ctx context.Context, bucket, key string) error {
	err := c.c.Bucket(bucket).Object(key).Delete(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return nil
	}
	return err
}
