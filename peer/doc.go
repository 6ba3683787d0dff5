// Package peer is the client half of the peer tier (issue 16): a cluster of playhead
// nodes that mount the same source reads each block from the origin once. Every
// stripe of consecutive blocks (key: source ID, path, version, stripe index) has one
// owner among the live members; Source, a source.Source wrapper, reads the stripes this
// node owns from the origin and the others from their owner's /v1/block endpoint
// (served by package peer/peerserve through the owner's own cache, reading exactly the
// range asked), and goes to the origin whenever a peer fails.
//
// Parts, one a file: membership (members.go: the interface and the static list;
// gossip.go: hashicorp/memberlist), ownership (ring.go), the shared secret and its
// keys (secret.go), request signing (auth.go), the wire protocol (protocol.go), the
// hedge (hedge.go) and its watch of one wait (watch.go), the memory of failures
// (health.go), the per-member counters (memberstats.go), the requests (client.go),
// the ordered body (body.go) and mutual TLS (tls.go).
//
// Design notes and traps:
//   - Ownership is rendezvous hashing (github.com/dgryski/go-rendezvous) over xxhash64.
//     Each (key, node) pair is scored alone, so adding a node moves exactly the keys it
//     wins, about 1/(N+1), and none between old nodes; there are no virtual nodes to
//     tune and the ring is a sorted list of names. buraksezer/consistent offers bounded
//     loads, which matter for a few hot keys among many nodes; here the keys are
//     stripes (a hot file spreads over every node stripe by stripe), and its partition
//     table moves more keys than their share on a change. A lookup is O(N), a few
//     hundred nanoseconds for the tens of nodes a cluster has.
//   - Ownership is by stripe (Options.StripeBlocks, 8 MiB by default), not by block:
//     with one owner a block, a sequential range changes owner almost every block,
//     which costs a peer request per block and leaves a node's own blocks to 256 KiB
//     origin ranges, a round trip each.
//   - The version in a block key is the size-mtime CacheKey, which every node has from
//     its listing; the ETag, learned from the first range, would move keys as nodes
//     learn it. The owner checks the full version (Agree) before it serves a byte, and
//     answers 409 otherwise; the reader then goes to the origin.
//   - Failure never costs a read: a peer that errors, refuses (401, 403, 404, 421),
//     answers 409, is cut mid-answer, or passes the hedge is bypassed for the origin,
//     for that run, and counted (Stats, MemberStats).
//   - The hedge waits for what the owner must do, not for a guess of it. An owner
//     says 102 (StatusReceived) once it has verified a request and owns the range,
//     sends its headers once its version check passes, and only then reads the range,
//     which may mean fetching it from its origin. The reader gives up on a peer that
//     has said nothing within the threshold (hedge.go: a few times the peer's usual
//     answer time, or its mean plus four deviations, plus the origin's first byte,
//     within a floor and a ceiling), and on an answer whose body is silent for the
//     threshold plus the ceiling; a peer that said 102, or that sends on other
//     requests meanwhile, is waited for longer (watch.go). So a cold owner, alive and
//     fetching, is not read around (which would fetch its stripe twice), while a peer
//     that is down or hung is bypassed within the threshold.
//   - Failures are remembered (health.go): a peer that failed (connect error, 5xx, cut
//     answer, no word within the threshold) is marked down for a backoff, 1 s
//     doubling to 30 s, during which its runs go to the origin without trying it; one
//     run then probes it, and an answer ends the backoff. A 409, a refusal or a
//     stalled body (the peer answered) is not a failure. A dead static peer so costs
//     one run per backoff, not every run.
//   - At most one peer hop: a node answers a peer only for ranges it owns end to end
//     by its own ring (peerserve), and reads the stripes it owns from the origin. A ctx marked
//     FromPeer sends every run to the origin too, for readers that pass the request's
//     ctx down; vfs's fetcher does not (it opens ranges on a context of its own), which
//     is why the ownership check, not the mark, keeps the invariant there.
//   - A range is split lazily into runs of consecutive stripes with one owner; the run
//     being read and Options.Ahead runs after it are in flight at once. The first run
//     is opened before OpenRange returns: its version is the body's, and every later
//     run is asked for it (the origin answers ErrChanged, a peer 409, for another).
//   - No wait cycle across nodes. Invariant: no node's range ever holds a block it
//     owns behind a block it asked a peer for, and no owner reads ahead for a peer.
//     fetch delivers a range's blocks in order, so it cuts every range it opens where
//     Source.RunEnd (fetch.RunBounds) says the owner changes; and peerserve reads a
//     peer's range through a file opened with vfs.FS.OpenExact, which claims that
//     range and nothing past it. A block a node owns then waits only on an origin
//     range, and a block it asked a peer for only on the owner's origin range for
//     it: no chain of waits leads back to the asking node, and the hedge is left for
//     peers that are slow or down, not for nodes waiting on each other.
//   - A request's signature covers its target host (auth.go), and a node accepts only
//     those signed for its own peer address: each node keeps its own nonces, so a
//     captured request must not be spendable once more at another node.
//   - The shared secret never leaves the process: it is redacted in String, errors
//     name its file only, memberlist gets a derived key (HKDF, its own label) and the
//     request HMAC another, and the source spec travels as a keyed hash of it.
//   - TLS (tls.go) is optional and mutual: every node presents a certificate of the
//     cluster's CA, as server and as client, and trusts no other issuer; the request
//     signature applies inside it all the same. Options.Client and Scheme "https"
//     carry it; the server side is the caller's http.Server (TLS.Server).
package peer
