package harness_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// TestWriteFileOnHost: on a handle whose files are the host's, WriteFile
// writes with os calls and keeps the shell version's rules: the directory
// made owner-only, the mode given, the content replaced whole, never
// through a symlink at the file's name, a malformed mode refused.
func TestWriteFileOnHost(t *testing.T) {
	h := localHandle(t)
	if _, ok := sandbox.HostPath(h, "/tmp"); !ok {
		t.Skip("the local handle maps no host paths here")
	}
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "run.files", "sub")
	file := filepath.Join(dir, "mcp.json")
	if err := harness.WriteFile(ctx, h, file, []byte("first, longer"), "600"); err != nil {
		t.Fatal(err)
	}
	if err := harness.WriteFile(ctx, h, file, []byte("second"), "640"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(file)
	if err != nil || string(got) != "second" {
		t.Fatalf("content %q, %v; want second", got, err)
	}
	for p, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, file: 0o640} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode(), want)
		}
	}
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := harness.WriteFile(ctx, h, link, []byte("through the link"), "600"); err == nil {
		t.Error("WriteFile wrote through a symlink at the file's name")
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the link's target became %q", b)
	}
	if err := harness.WriteFile(ctx, h, filepath.Join(dir, "x"), nil, "rwx"); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("mode rwx: %v, want InvalidArgument", err)
	}
}
