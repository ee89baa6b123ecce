package sandbox_test

import (
	"path"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
)

func TestCheckLinkTarget(t *testing.T) {
	cases := []struct {
		link, target string
		ok           bool
	}{
		{"l", "a", true},
		{"l", "a/b", true},
		{"l", ".", true},
		{"d/l", "..", true},
		{"d/e/l", "../../x", true},
		{"d/l", "../e/f", true},
		{"l", "..", false},
		{"l", "../x", false},
		{"d/l", "../../x", false},
		{"l", "/etc", false},
		{"l", "/workspace/a", false},
		{"l", "", false},
		{"l", "a\x00b", false},
		{"l", "a\xff", false},
		{"l", "./a", false},
		{"l", "a/", false},
		{"l", "a//b", false},
		{"d/l", "x/../..", false},
		{"d/l", "x/../../..", false},
	}
	for _, c := range cases {
		err := sandbox.CheckLinkTarget(c.link, c.target)
		if (err == nil) != c.ok {
			t.Errorf("CheckLinkTarget(%q, %q) = %v, want ok=%v", c.link, c.target, err, c.ok)
		}
		if err != nil && sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Errorf("CheckLinkTarget(%q, %q): code %v", c.link, c.target, sandbox.CodeOf(err))
		}
	}
}

func FuzzCheckLinkTarget(f *testing.F) {
	f.Add("d/l", "../x")
	f.Add("l", "a/../..")
	f.Add("a/b/c", "../../..")
	f.Fuzz(func(t *testing.T, link, target string) {
		rel, err := sandbox.CleanPath(link)
		if err != nil || rel != link || rel == "." || path.IsAbs(link) {
			return
		}
		if sandbox.CheckLinkTarget(link, target) != nil {
			return
		}
		r := path.Join(path.Dir(link), target)
		if path.IsAbs(target) || r == ".." || strings.HasPrefix(r, "../") {
			t.Fatalf("%q -> %q accepted but resolves to %q", link, target, r)
		}
		segs := strings.Split(target, "/")
		for i, seg := range segs {
			if seg == ".." && i > 0 && segs[i-1] != ".." {
				t.Fatalf("%q -> %q climbs out of a named directory", link, target)
			}
		}
	})
}
