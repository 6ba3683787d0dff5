// Package objstore starts real object-store emulators on loopback for tests: MinIO
// (S3), Azurite (Azure Blob) and fake-gcs-server (GCS), installed outside the tree by
// scripts/objstore-servers.sh. It is a test helper: only _test.go files import it.
package objstore
