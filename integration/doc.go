// Package integration holds playhead's end-to-end tests: an HTTP origin (the built-in
// pattern origin, or nginx when installed) read through httpsrc, vfs and a real FUSE
// mount, checked byte by byte against internal/pattern. It has no code of its own.
//
// Traps:
//   - The tests need FUSE. Without it they skip, unless PLAYHEAD_REQUIRE_FUSE=1 (CI),
//     where they fail; the nginx test likewise with PLAYHEAD_REQUIRE_NGINX=1.
//   - The kernel keeps file pages across reads of one mount. A test that must reach
//     playhead (not the page cache) on a second read mounts again, or drops the pages
//     with fadvise.
//   - origin.Stats().BytesWritten counts listings too: compare counts taken after the
//     listing was fetched.
package integration
