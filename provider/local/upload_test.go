package local_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/sandbox"
)

// TestUploadDir checks the shared SourceDir upload the wire providers use:
// files and directories arrive through the FS; a symbolic link is refused
// naming the provider.
func TestUploadDir(t *testing.T) {
	ctx := context.Background()
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	h, err := p.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "a", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "a", "f.txt"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sandbox.UploadDir(ctx, h.FS(), src, "test"); err != nil {
		t.Fatal(err)
	}
	if b, err := h.FS().ReadFile(ctx, "a/f.txt"); err != nil || string(b) != "hi" {
		t.Fatalf("a/f.txt: %q, %v", b, err)
	}
	if fi, err := h.FS().Stat(ctx, "a/empty"); err != nil || fi.Type != sandbox.TypeDir {
		t.Fatalf("a/empty: %+v, %v", fi, err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	err = sandbox.UploadDir(ctx, h.FS(), src, "test")
	if err == nil || !strings.Contains(err.Error(), "symbolic link (link); the test provider") {
		t.Fatalf("a link: %v, want it refused naming the provider", err)
	}
}
