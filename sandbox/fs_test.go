package sandbox_test

import (
	"path"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
)

func TestCleanPath(t *testing.T) {
	tests := []struct {
		in   string
		want string
		code sandbox.Code
	}{
		{"/workspace", ".", sandbox.OK},
		{"/workspace/", ".", sandbox.OK},
		{"/workspace/a/b", "a/b", sandbox.OK},
		{"/workspace/a/../b", "b", sandbox.OK},
		{"a/b", "a/b", sandbox.OK},
		{"./a//b/", "a/b", sandbox.OK},
		{".", ".", sandbox.OK},
		{"a/..", ".", sandbox.OK},
		{"..a", "..a", sandbox.OK},
		{"", "", sandbox.InvalidArgument},
		{"..", "", sandbox.InvalidArgument},
		{"../x", "", sandbox.InvalidArgument},
		{"a/../../x", "", sandbox.InvalidArgument},
		{"/etc/passwd", "", sandbox.InvalidArgument},
		{"/workspace/../etc", "", sandbox.InvalidArgument},
		{"/workspacefoo", "", sandbox.InvalidArgument},
		{"/", "", sandbox.InvalidArgument},
		{"a\x00b", "", sandbox.InvalidArgument},
	}
	for _, tt := range tests {
		got, err := sandbox.CleanPath(tt.in)
		if sandbox.CodeOf(err) != tt.code || got != tt.want {
			t.Errorf("CleanPath(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.code)
		}
	}
}

func TestMapPath(t *testing.T) {
	for _, tt := range []struct{ root, in, want string }{
		{"/tmp/sb", "/workspace", "/tmp/sb"},
		{"/tmp/sb", "/workspace/x/y", "/tmp/sb/x/y"},
		{"/workspace", "x", "/workspace/x"},
		{"/home/daytona", "x/../y", "/home/daytona/y"},
	} {
		got, err := sandbox.MapPath(tt.root, tt.in)
		if err != nil || got != tt.want {
			t.Errorf("MapPath(%q, %q) = %q, %v; want %q", tt.root, tt.in, got, err, tt.want)
		}
	}
}

// FuzzCleanPath checks that whatever CleanPath accepts stays inside the
// workspace and is already clean.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{"a", "../a", "/workspace/../x", "/workspace/a/./b", "a/b/../../..", "//workspace//a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		rel, err := sandbox.CleanPath(in)
		if err != nil {
			if sandbox.CodeOf(err) != sandbox.InvalidArgument {
				t.Fatalf("CleanPath(%q): code %v", in, sandbox.CodeOf(err))
			}
			return
		}
		if rel != path.Clean(rel) || path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") || strings.ContainsRune(rel, 0) {
			t.Fatalf("CleanPath(%q) = %q escapes or is not clean", in, rel)
		}
		full := sandbox.PortablePath(rel)
		if full != sandbox.WorkspaceRoot && !strings.HasPrefix(full, sandbox.WorkspaceRoot+"/") {
			t.Fatalf("PortablePath(%q) = %q is outside the workspace", rel, full)
		}
		if again, err := sandbox.CleanPath(full); err != nil || again != rel {
			t.Fatalf("CleanPath is not idempotent on %q: %q, %v", full, again, err)
		}
	})
}
