package execfs_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
)

// TestLinksAndModes covers the optional sandbox.LinkFS and sandbox.ModeFS.
func TestLinksAndModes(t *testing.T) {
	forEachShell(t, func(t *testing.T, e env) {
		ctx := context.Background()
		lfs, ok := e.fs.(sandbox.LinkFS)
		if !ok {
			t.Fatal("execfs is not a sandbox.LinkFS")
		}
		mfs, ok := e.fs.(sandbox.ModeFS)
		if !ok {
			t.Fatal("execfs is not a sandbox.ModeFS")
		}
		must(t, e.fs.WriteFile(ctx, "d/f.txt", []byte("x")))
		must(t, os.Symlink(e.outside, filepath.Join(e.root, "out")))

		for _, c := range []struct{ target, name string }{
			{"f.txt", "d/l"}, {"..", "d/up"}, {"-n x", "d/dash"}, {"a b\nc", "d/odd"}, {"d/f.txt", "top"},
		} {
			must(t, lfs.Symlink(ctx, c.target, c.name))
			got, err := lfs.Readlink(ctx, c.name)
			must(t, err)
			if got != c.target {
				t.Errorf("Readlink(%q) = %q, want %q", c.name, got, c.target)
			}
			if real, err := os.Readlink(filepath.Join(e.root, c.name)); err != nil || real != c.target {
				t.Errorf("host link %q -> %q (%v)", c.name, real, err)
			}
		}
		wantCode(t, "escaping target", lfs.Symlink(ctx, "../x", "esc"), sandbox.InvalidArgument)
		wantCode(t, "absolute target", lfs.Symlink(ctx, "/etc", "abs"), sandbox.InvalidArgument)
		wantCode(t, "unclean target", lfs.Symlink(ctx, "d/../..", "unclean"), sandbox.InvalidArgument)
		wantCode(t, "existing name", lfs.Symlink(ctx, "f.txt", "d/l"), sandbox.AlreadyExists)
		wantCode(t, "existing file", lfs.Symlink(ctx, "f.txt", "d/f.txt"), sandbox.AlreadyExists)
		wantCode(t, "missing parent", lfs.Symlink(ctx, "x", "nope/l"), sandbox.NotFound)
		wantCode(t, "through an escaping link", lfs.Symlink(ctx, "x", "out/l"), sandbox.PermissionDenied)
		if _, err := os.Lstat(filepath.Join(e.outside, "l")); err == nil {
			t.Error("a link was made outside the workspace")
		}
		_, err := lfs.Readlink(ctx, "d/f.txt")
		wantCode(t, "readlink of a file", err, sandbox.FailedPrecondition)
		_, err = lfs.Readlink(ctx, "missing")
		wantCode(t, "readlink of nothing", err, sandbox.NotFound)
		if got, err := lfs.Readlink(ctx, "out"); err != nil || got != e.outside {
			t.Errorf("readlink of an escaping link itself: %q, %v", got, err)
		}
		_, err = lfs.Readlink(ctx, "out/secret")
		wantCode(t, "readlink through an escaping link", err, sandbox.PermissionDenied)

		must(t, mfs.Chmod(ctx, "d/f.txt", 0o755))
		if fi, _ := os.Stat(filepath.Join(e.root, "d/f.txt")); fi.Mode().Perm() != 0o755 {
			t.Errorf("mode %o after chmod 755", fi.Mode().Perm())
		}
		must(t, mfs.Chmod(ctx, "d/f.txt", 0o644))
		if fi, _ := os.Stat(filepath.Join(e.root, "d/f.txt")); fi.Mode().Perm() != 0o644 {
			t.Errorf("mode %o after chmod 644", fi.Mode().Perm())
		}
		wantCode(t, "chmod of a link", mfs.Chmod(ctx, "d/l", 0o600), sandbox.FailedPrecondition)
		wantCode(t, "chmod of an escaping link", mfs.Chmod(ctx, "out", 0o600), sandbox.FailedPrecondition)
		wantCode(t, "chmod through an escaping link", mfs.Chmod(ctx, "out/secret", 0o644), sandbox.PermissionDenied)
		wantCode(t, "chmod of nothing", mfs.Chmod(ctx, "missing", 0o644), sandbox.NotFound)
		if fi, _ := os.Stat(filepath.Join(e.outside, "secret")); fi.Mode().Perm() != 0o600 {
			t.Errorf("the outside file's mode changed to %o", fi.Mode().Perm())
		}
	})
}
