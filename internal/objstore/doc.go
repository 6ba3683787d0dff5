// Package objstore starts real object-store emulators on loopback for tests: MinIO
// (S3), Azurite (Azure Blob) and fake-gcs-server (GCS), installed outside the tree by
// scripts/objstore-servers.sh (make deps) into ${PLAYHEAD_TESTBIN:-~/.cache/playhead}.
// It is a test helper: only _test.go files import it. MinIO (AGPL) is only ever run as
// a separate process.
//
//	s := objstore.Start(t, objstore.S3) // fresh server, killed when the test ends
//	b := s.NewBucket(t)
//	b.Put(t, "dir/a.mkv", data)
//	// mount b.URL("dir/") with s.Params() as flags and s.Env() in the environment
//
// Start skips the test when an emulator is not installed or does not answer, and fails
// it instead with PLAYHEAD_REQUIRE_OBJSTORE=1 (CI). Each server gets its own free port
// and t.TempDir(); a start takes about 0.5 s for MinIO, 1 to 2 s for Azurite (node)
// and 0.05 s for fake-gcs-server.
//
// # Reaching each server
//
// These are checked by gocloud_test.go, with gocloud.dev v0.47.0 and the SDK versions
// in go.mod. Each way takes only Params and Env.
//
// S3 (MinIO). Params s3-endpoint (http://127.0.0.1:PORT), s3-region (us-east-1),
// s3-path-style (true); Env AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (random per
// server), AWS_EC2_METADATA_DISABLED=true.
//
//	blob.OpenBucket(ctx, "s3://BUCKET?endpoint=http%3A%2F%2F127.0.0.1%3APORT&region=us-east-1&use_path_style=true")
//	// (credentials from the environment; awssdk=v2 is accepted and ignored: v2 is the only SDK)
//
//	cfg, _ := config.LoadDefaultConfig(ctx, config.WithRegion(region),
//		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(id, secret, "")))
//	c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.BaseEndpoint = aws.String(endpoint); o.UsePathStyle = true })
//	s3blob.OpenBucket(ctx, c, "BUCKET", nil)
//
// Azure (Azurite). Params azure-account (devstoreaccount1), azure-endpoint: the blob
// service URL with the account as first path segment,
// http://127.0.0.1:PORT/devstoreaccount1 (Azurite's path-style addressing; a real
// account's is https://ACCOUNT.blob.core.windows.net); Env AZURE_STORAGE_ACCOUNT,
// AZURE_STORAGE_KEY (Azurite's well-known development key).
//
//	blob.OpenBucket(ctx, "azblob://CONTAINER?localemu=true&domain=127.0.0.1%3APORT&protocol=http&storage_account=devstoreaccount1")
//
//	cred, _ := azblob.NewSharedKeyCredential(account, key)
//	cc, _ := container.NewClientWithSharedKeyCredential(endpoint+"/CONTAINER", cred, nil)
//	azureblob.OpenBucket(ctx, cc, nil)
//
// Beware: the azblob:// URL opener of blob.DefaultURLMux reads AZURE_STORAGE_* once per
// process (the first azblob:// open) and keeps them: a later change of the environment
// (WrongEnv, another account) is not seen. Build the client as above instead. Without
// AZURE_STORAGE_KEY it falls back to azidentity's DefaultAzureCredential, which probes
// the instance metadata address: never open an azblob:// URL without a key in tests.
//
// GCS (fake-gcs-server). Params gcs-endpoint (http://127.0.0.1:PORT); Env
// STORAGE_EMULATOR_HOST=127.0.0.1:PORT (host and port without a scheme: gcsblob puts
// "http://" in front). The server checks no credentials.
//
//	blob.OpenBucket(ctx, "gs://BUCKET") // with STORAGE_EMULATOR_HOST set: gcsblob then uses
//	// option.WithoutAuthentication and WithEndpoint("http://"+host+"/storage/v1/")
//
//	c, _ := storage.NewClient(ctx, option.WithEndpoint(endpoint+"/storage/v1/"), option.WithoutAuthentication())
//	gcsblob.OpenBucket(ctx, nil, "BUCKET", &gcsblob.Options{Client: c})
//
// Without STORAGE_EMULATOR_HOST, gs:// URLs look for Google's default credentials,
// which probes the GCE metadata server. fake-gcs-server runs with -public-host and
// -external-url set to its own address, so that the client's XML-API reads
// (GET /BUCKET/OBJECT) and upload redirects reach it.
//
// # Conditional reads (object replaced under a reader)
//
// With a token from Attributes, a read that must not mix two versions of an object:
//   - S3: ReaderOptions.BeforeRead, as(&in) with in *s3.GetObjectInput, in.IfMatch =
//     attrs.ETag. After a replace: 412 PreconditionFailed, gcerrors.FailedPrecondition.
//   - Azure: as(&o) with o *blob.DownloadStreamOptions (azblob/blob), o.AccessConditions
//     = &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{
//     IfMatch: &etag}}, etag = azcore.ETag(attrs.ETag). After a replace: 412
//     ConditionNotMet, gcerrors.FailedPrecondition.
//   - GCS: as(&oh) with oh **storage.ObjectHandle, *oh = (*oh).If(storage.Conditions{
//     GenerationMatch: gen}), gen from attrs.As(&storage.ObjectAttrs).Generation. Real
//     GCS answers 412 (FailedPrecondition). fake-gcs-server IGNORES read preconditions
//     and serves the new object with no error. What detects the change on both: the
//     generation the read was served from, r.Attrs.Generation with as(&r), r
//     *storage.Reader (after the ObjectHandle, in that order), compared with gen; or a
//     read pinned with (*oh).Generation(gen), which gives NotFound once that generation
//     is gone (on a bucket without versioning).
//
// # Errors, as gcerrors.Code(err) (measured here)
//
//	                            S3 (MinIO)            Azure (Azurite)        GCS (fake-gcs-server)
//	missing object (attrs/read) NotFound              NotFound               NotFound
//	missing bucket              NotFound              NotFound               NotFound
//	replaced, If-Match read     FailedPrecondition    FailedPrecondition     no error (see above)
//	wrong secret                attrs (HEAD):         Unknown, HTTP 403      (no credentials)
//	                            PermissionDenied;     AuthorizationFailure
//	                            read/list: Unknown,
//	                            HTTP 403 SignatureDoesNotMatch
//	connection refused          Unknown, ~1-3 s       Unknown, ~10 s         DeadlineExceeded: retries
//	                            (3 attempts)          (azcore retries)       until the context ends
//	server silent (accepts,     until the context ends, for all three: no SDK has a
//	never answers)              response timeout by default
//
// blob.OpenBucket never contacts the server: a missing bucket or wrong secret shows at
// the first request. Bucket.IsAccessible gives (false, nil) for a missing bucket and an
// error for a wrong secret. So a wrong secret is PermissionDenied only by chance (a HEAD
// has no body to name the error); map HTTP 401/403 yourself (errors.As with
// *awshttp.ResponseError, *azcore.ResponseError, *googleapi.Error) to report bad
// credentials at mount time. Real Azure says AuthenticationFailed (which gocloud maps
// to PermissionDenied), Azurite AuthorizationFailure (Unknown).
//
// # Throttling
//
// Throttled puts a proxy in front of a server that refuses the first n requests as the
// cloud does (S3 503 SlowDown, Azure 503 ServerBusy, GCS 429 rateLimitExceeded). With
// their default retry policies each SDK gets through one refusal by itself, in about
// 0.4 s (AWS), 0.9 s (azcore) and 0.6 to 0.9 s (GCS).
//
// # Requests
//
// For MinIO, Requests reads the server's own counts of S3 requests by API name and the
// response bytes it sent, from its Prometheus metrics (v3,
// /minio/metrics/v3/api/requests: minio_api_requests_total{name="GetObject",type="s3"},
// minio_api_requests_traffic_sent_bytes{type="s3"}).
package objstore
