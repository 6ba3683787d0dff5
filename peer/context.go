package peer

import "context"

// fromPeerKey marks a context as serving a peer's request.
type fromPeerKey struct{}

// FromPeer marks ctx as serving a request that came from a peer: a Source given such a
// ctx reads every run from the origin. With the server's ownership check this keeps
// the invariant that a block crosses at most one peer hop (see the package doc).
func FromPeer(ctx context.Context) context.Context {
	return context.WithValue(ctx, fromPeerKey{}, true)
}

// IsFromPeer reports whether ctx was marked by FromPeer.
func IsFromPeer(ctx context.Context) bool {
	v, _ := ctx.Value(fromPeerKey{}).(bool)
	return v
}
