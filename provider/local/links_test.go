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

// TestLinksAndModes covers the local FS's sandbox.LinkFS and
// sandbox.ModeFS, reached through the guard as every caller reaches it.
func TestLinksAndModes(t *testing.T) {
	ctx := context.Background()
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	g := sandbox.Guard(p, sandbox.GuardOptions{})
	h, err := g.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	root, outside := h.WorkspaceRoot(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	fsys := h.FS()
	lfs, ok := fsys.(sandbox.LinkFS)
	if !ok {
		t.Fatal("the guarded local FS is not a sandbox.LinkFS")
	}
	mfs, ok := fsys.(sandbox.ModeFS)
	if !ok {
		t.Fatal("the guarded local FS is not a sandbox.ModeFS")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	code := func(what string, err error, want sandbox.Code) {
		t.Helper()
		if got := sandbox.CodeOf(err); got != want {
			t.Errorf("%s: code %v (%v), want %v", what, got, err, want)
		}
	}
	must(fsys.WriteFile(ctx, "d/f.txt", []byte("x")))
	must(os.Symlink(outside, filepath.Join(root, "out")))

	for _, c := range []struct{ target, name string }{
		{"f.txt", "d/l"}, {"..", "d/up"}, {"-n x", "d/dash"}, {"a b\nc", "d/odd"}, {"d/f.txt", "/workspace/top"},
	} {
		must(lfs.Symlink(ctx, c.target, c.name))
		got, err := lfs.Readlink(ctx, c.name)
		must(err)
		if got != c.target {
			t.Errorf("Readlink(%q) = %q, want %q", c.name, got, c.target)
		}
	}
	code("escaping target", lfs.Symlink(ctx, "../x", "esc"), sandbox.InvalidArgument)
	code("absolute target", lfs.Symlink(ctx, "/etc", "abs"), sandbox.InvalidArgument)
	code("unclean target", lfs.Symlink(ctx, "d/../..", "unclean"), sandbox.InvalidArgument)
	code("existing name", lfs.Symlink(ctx, "f.txt", "d/l"), sandbox.AlreadyExists)
	code("missing parent", lfs.Symlink(ctx, "x", "nope/l"), sandbox.NotFound)
	code("through an escaping link", lfs.Symlink(ctx, "x", "out/l"), sandbox.PermissionDenied)
	if _, err := os.Lstat(filepath.Join(outside, "l")); err == nil {
		t.Error("a link was made outside the workspace")
	}
	_, err = lfs.Readlink(ctx, "d/f.txt")
	code("readlink of a file", err, sandbox.FailedPrecondition)
	_, err = lfs.Readlink(ctx, "missing")
	code("readlink of nothing", err, sandbox.NotFound)
	if got, err := lfs.Readlink(ctx, "out"); err != nil || got != outside {
		t.Errorf("readlink of an escaping link itself: %q, %v", got, err)
	}
	_, err = lfs.Readlink(ctx, "out/secret")
	code("readlink through an escaping link", err, sandbox.PermissionDenied)

	for _, m := range []os.FileMode{0o755, 0o644} {
		must(mfs.Chmod(ctx, "d/f.txt", m))
		if fi, _ := os.Stat(filepath.Join(root, "d/f.txt")); fi.Mode().Perm() != m {
			t.Errorf("mode %o after chmod %o", fi.Mode().Perm(), m)
		}
	}
	code("chmod of a link", mfs.Chmod(ctx, "d/l", 0o600), sandbox.FailedPrecondition)
	code("chmod of an escaping link", mfs.Chmod(ctx, "out", 0o600), sandbox.FailedPrecondition)
	code("chmod through an escaping link", mfs.Chmod(ctx, "out/secret", 0o644), sandbox.PermissionDenied)
	code("chmod of nothing", mfs.Chmod(ctx, "missing", 0o644), sandbox.NotFound)
	if fi, _ := os.Stat(filepath.Join(outside, "secret")); fi.Mode().Perm() != 0o600 {
		t.Errorf("the outside file's mode changed to %o", fi.Mode().Perm())
	}
}

// TestWriteReplacesHardLink: a write to a name the agent hard-linked to a
// file outside the workspace replaces the name and leaves the outside file
// as it was; an existing file keeps its mode.
func TestWriteReplacesHardLink(t *testing.T) {
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	h, err := p.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(outside, filepath.Join(h.WorkspaceRoot(), "planted")); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	if err := h.FS().WriteFile(ctx, "/workspace/planted", []byte("restored")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "outside" {
		t.Fatalf("the write went through the hard link: outside file now %q", b)
	}
	if b, _ := h.FS().ReadFile(ctx, "/workspace/planted"); string(b) != "restored" {
		t.Fatalf("the workspace file reads %q", b)
	}
	exe := filepath.Join(h.WorkspaceRoot(), "run.sh")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := h.FS().WriteFile(ctx, "/workspace/run.sh", []byte("#!/bin/sh\necho\n")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(exe); err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("run.sh after a write: %v %v, want 0755 kept", fi.Mode(), err)
	}
	ents, _ := os.ReadDir(h.WorkspaceRoot())
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".corral-write-") {
			t.Fatalf("a temporary file was left: %s", e.Name())
		}
	}
}
