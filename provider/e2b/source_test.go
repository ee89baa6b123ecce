package e2b_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/e2b"
	"github.com/d10ffeed/corral/sandbox"
)

// TestSourceDir: a host directory lands in the workspace with one POST to
// envd's /files for all its files and one command for the empty
// directory and the executable bit; a symbolic link is refused and
// leaves no sandbox.
func TestSourceDir(t *testing.T) {
	ctx := testutil.HangGuard(t)
	f := newFake(t)
	p, _ := newProvider(t, f, e2b.Options{})
	src := t.TempDir()
	for name, body := range map[string]string{"a.txt": "a", "sub/deep/b.txt": "b", "run.sh": "#!/bin/sh\necho ran\n"} {
		_ = os.MkdirAll(filepath.Join(src, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.Chmod(filepath.Join(src, "run.sh"), 0o755)
	_ = os.Mkdir(filepath.Join(src, "empty"), 0o755)
	writes, starts := f.Count("files.write"), f.Count("start")
	h := create(t, ctx, p, sandbox.CreateOptions{SourceDir: src})
	writes, starts = f.Count("files.write")-writes, f.Count("start")-starts
	res, err := h.Exec(ctx, sandbox.Command{Shell: `cat a.txt sub/deep/b.txt; ./run.sh; [ -d empty ] && echo empty-dir`})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SourceDir of 3 files and an empty directory: %d POST /files, %d commands at create; exec: %q", writes, starts, res.Stdout)
	if string(res.Stdout) != "abran\nempty-dir\n" || writes != 1 || starts != 1 {
		t.Fatalf("stdout %q, writes %d, starts %d", res.Stdout, writes, starts)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	before := len(f.Sandboxes("", nil))
	_, err = p.Create(ctx, sandbox.CreateOptions{SourceDir: src})
	if err == nil || !strings.Contains(err.Error(), "symbolic link") || len(f.Sandboxes("", nil)) != before {
		t.Fatalf("a link in SourceDir: %v, sandboxes %d (was %d)", err, len(f.Sandboxes("", nil)), before)
	}
}
