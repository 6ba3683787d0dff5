package fetch

import (
	"testing"

	"github.com/playhead/playhead/source"
)

func TestPagesFor(t *testing.T) {
	fx := newFixture(t, 4*testBlock, nil, testOptions())
	opened := fx.file
	sizeOnly := fx.f.Open("a.bin", source.Version{Size: 4 * testBlock}) // another File: a listing's size only
	defer sizeOnly.Release()
	failed := fx.f.Open("b.bin", source.Version{Size: 1})
	defer failed.Release()
	failed.fail(&source.PathError{Op: "test", Path: "b.bin", Off: -1, Err: source.ErrChanged})
	for _, c := range []struct {
		name                 string
		pages                *File
		othersOpen, shared   bool
		want                 Pages
		pinOpened, pinOthers bool
	}{
		{"no pages known", nil, false, false, DropPages, false, false},
		{"the same File", opened, false, false, KeepPages, true, false},
		{"the same File, shared", opened, false, true, KeepPages, true, true},
		{"a version without a strong validator", sizeOnly, false, false, DropPages, false, false},
		{"a changed File's pages", failed, false, false, DropPages, false, false},
		{"dropped while others read the pages", sizeOnly, false, true, DropPages, true, true},
		{"another version's handles open", opened, true, true, BypassPages, false, false},
	} {
		d := PagesFor(c.pages, opened, c.othersOpen, c.shared)
		if d.Pages != c.want || d.PinOpened != c.pinOpened || d.PinOthers != c.pinOthers {
			t.Errorf("%s: %+v, want pages %v, pin opened %v, pin others %v", c.name, d, c.want, c.pinOpened, c.pinOthers)
		}
	}
}
