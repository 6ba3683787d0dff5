package fetch

// Pages is what to do with the kernel's cached pages of a file when a handle opens it.
type Pages int

const (
	// DropPages: the pages may hold another version; the kernel drops them at this open.
	DropPages Pages = iota
	// KeepPages: the pages hold this handle's version; the kernel keeps serving them.
	KeepPages
	// BypassPages: handles of another version are still open and their reads go
	// through the pages; this handle reads around them (direct I/O), so neither side
	// sees the other's bytes.
	BypassPages
)

// PageDecision is what the FUSE edge does when a handle opens a file: the FOPEN flags
// (Pages), and which handles to pin to their version (vfs.File.Pin), because the
// kernel may serve them bytes from pages that other handles' reads filled, which the
// daemon never sees.
type PageDecision struct {
	Pages     Pages
	PinOpened bool // the new handle may be served pages it did not read itself
	PinOthers bool // the open handles that use the pages may be served the new one's
}

// PagesFor decides, for a handle of opened, what becomes of the kernel's pages of its
// file, filled by reads of the File pages (nil: none known). othersOpen says handles of
// a File other than opened are open on the file; sharedOpen, that handles reading
// through the pages are open. It is the one place where the kernel's page cache is tied
// to an object version:
//   - pages of a File whose object changed are never kept;
//   - pages are kept only when their version is known to be opened's: the same File,
//     or an equal strong validator (Version.Same in package source); a listing that
//     gives only a size cannot vouch for a same-size replacement;
//   - while another version's handles are open, the new handle bypasses the pages;
//   - a handle that shares pages with others is pinned, since what it returns is not
//     all read through it.
func PagesFor(pages, opened *File, othersOpen, sharedOpen bool) PageDecision {
	switch {
	case othersOpen:
		return PageDecision{Pages: BypassPages} // reads neither fill nor use the pages
	case pages != nil && pages.Err() == nil &&
		(pages == opened || pages.Version().Same(opened.Version())):
		return PageDecision{Pages: KeepPages, PinOpened: true, PinOthers: sharedOpen}
	}
	// Dropped at this open: the pages filled from now on are of opened's version.
	return PageDecision{Pages: DropPages, PinOpened: sharedOpen, PinOthers: sharedOpen}
}
