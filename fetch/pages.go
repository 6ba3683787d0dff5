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

// PagesFor decides whether the kernel's pages of a file, filled by reads of the File
// pages (nil: none known), may serve a handle of opened. othersOpen says that handles of
// a File other than opened are still open on the file. It is the one place where the
// kernel's page cache is tied to an object version:
//   - pages of a File whose object changed are never kept;
//   - pages are kept only when their version is known to be opened's: the same File,
//     or a strong validator both carry (Version.Same in package source); a listing that gives only
//     a size cannot vouch for a same-size replacement;
//   - while another version's handles are open, the new handle bypasses the pages.
func PagesFor(pages, opened *File, othersOpen bool) Pages {
	switch {
	case othersOpen:
		return BypassPages
	case pages == nil || pages.Err() != nil:
		return DropPages
	case pages == opened:
		return KeepPages
	}
	if pages.Version().Same(opened.Version()) {
		return KeepPages
	}
	return DropPages
}
