# playhead — make demo, make test.
GO        ?= go
BIN       := bin/playhead
# The version is stamped into the binary so benchmarks can refuse a stale build.
COMMIT    := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
DIRTY     := $(shell test -n "$$(git status --porcelain --untracked-files=no 2>/dev/null)" && echo -dirty)
BUILDTIME := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS   := -X main.commit=$(COMMIT)$(DIRTY) -X main.buildTime=$(BUILDTIME)

.PHONY: all build test test-short reliability demo deps bench-deps bench vet fmt clean

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/playhead

# GO_MIN is the Go release the module needs (go.mod); deps checks the go on PATH.
GO_MIN := 1.26

# deps installs what the tests need on a fresh Debian machine: the C compiler and libc
# headers that -race needs (gcc, libc6-dev), fuse3 for fusermount3 and /dev/fuse users,
# nginx as a second real origin (with sub_filter, for chunked answers), fio for its
# data verification through a mount, iproute2 (ip, tc) for the kernel-shaped link test
# (linkemu/kernlink; it skips unless root), and ca-certificates for fetching Go modules. As
# root it uses apt-get; otherwise it says what to run. Then the object-store emulators
# the S3, Azure and GCS tests start (MinIO, Azurite, fake-gcs-server), built or
# installed once into ${PLAYHEAD_TESTBIN:-~/.cache/playhead}, outside the tree (about
# 5 minutes the first time, MinIO's build most of it; Azurite needs node and npm).
deps:
	@GO_MIN=$(GO_MIN) ./scripts/deps.sh gcc libc6-dev ca-certificates fuse3 'nginx-light|nginx' fio iproute2 ffmpeg
	@./scripts/objstore-servers.sh

# bench-deps adds the comparator: Debian's rclone, and a newer one built into bin/deps
# when Debian's lacks --vfs-read-chunk-streams (RCLONE_VERSION picks it); ffmpeg (with
# ffprobe) for the players scenario, which also makes its media; and MinIO for
# --origin s3.
bench-deps:
	@./scripts/deps.sh fuse3 'nginx-light|nginx' rclone fio iproute2 ffmpeg
	@./scripts/bench-rclone.sh
	@./scripts/objstore-servers.sh

# -p 1: the link emulator and paced-reader tests measure real time; packages running
# side by side on two cores would make them measure the scheduler instead.
test: deps
	$(GO) vet ./...
	$(GO) test -race -count=1 -p 1 -timeout 15m ./...

# reliability runs the long versions of the reliability tests (issue 4) and writes their
# figures into docs/RELIABILITY.md (about 10 minutes). Each test prints its figures as
# log lines "RELIABILITY <test name>: <text>"; a new reliability test joins by adding
# its name to RELIABILITY_RUN (matched in every package: go test ./...). The fuzzers of
# RELIABILITY_FUZZ (package:Fuzzer) then run RELIABILITY_FUZZTIME each, one at a time.
RELIABILITY_RUN ?= ^(TestConnectionFaults|TestConnectionStallThroughMountIsEIO|TestKill9DuringReadsNeverCorruptsTheCache|TestCacheDiskFullThroughMount|TestSoak|TestFioVerify|TestHostileListings|TestHostileCommandLines|TestModelRandomReads|TestHTTPOriginScriptedFaults|TestHTTPOriginRandomFaults|TestHTTPOriginOutageThenRecovery|TestMountOriginOutageIsEIO|TestHTTPObjectChanged|TestMountObjectChangedIsESTALE|TestCacheCorruptionThroughEngine|TestCacheCorruptionUnderLoad|TestMetricsShowCacheCorruption|TestMetadataFaultsThroughMountAreEIO|TestUnknownSizeThroughMount|TestUnknownSizeNginxChunked|TestStopWithReaderBlockedInRead|TestSignalWithReaderBlockedLeavesNoStaleMount|TestModelChangesThroughFUSE|TestMemoryBoundedOverManyDirectories|TestListTenThousandObjects|TestModelChangesOverMinIO|TestKill9OverMinIO|TestBucketObjectDeletedWhileOpen|TestBucketObjectReplacedBetweenReads|TestBucketObjectReplacedWithinASecond|TestBucketThrottledReadThroughMount)$$
RELIABILITY_FUZZ ?= cache:FuzzDecodeRecord cache:FuzzDecodeMeta cache:FuzzIndexFile source/httpsrc:FuzzParseContentRange source/httpsrc:FuzzParseListing
RELIABILITY_FUZZTIME ?= 20s
reliability: deps
	PLAYHEAD_LONG=1 PLAYHEAD_CRASH_KILLS=20 PLAYHEAD_REQUIRE_FUSE=1 RELIABILITY_RUN='$(RELIABILITY_RUN)' RELIABILITY_FUZZ='$(RELIABILITY_FUZZ)' RELIABILITY_FUZZTIME='$(RELIABILITY_FUZZTIME)' ./scripts/reliability.sh

test-short:
	$(GO) test -short -count=1 ./...

demo: build deps
	./$(BIN) demo

bench: build bench-deps
	./$(BIN) bench run

fmt:
	gofmt -l -w .

clean:
	rm -rf bin
