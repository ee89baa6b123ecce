//go:build linux

package local

import (
	"context"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
)

// TestIdleMark shows which sandboxes Destroy may tear down without the
// /proc scan: only a directory Create or Fork made, until anything starts.
func TestIdleMark(t *testing.T) {
	ctx := context.Background()
	p, err := New(Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	h, err := p.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(ctx) })
	if !isIdle(h.ID()) {
		t.Skip("the file system of the test's temporary directory has no user xattrs")
	}
	f, err := h.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Destroy(ctx) })
	if !isIdle(f.ID()) {
		t.Error("a fresh fork is not marked idle")
	}
	// A command that is not found starts nothing and keeps the mark.
	if res, err := h.Exec(ctx, sandbox.Command{Args: []string{"corral-no-such-program"}}); err != nil || res.ExitCode != 127 {
		t.Fatalf("exec missing program: %v %+v", err, res)
	}
	if !isIdle(h.ID()) {
		t.Error("a command that never started removed the mark")
	}
	if _, err := h.Exec(ctx, sandbox.Command{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if isIdle(h.ID()) {
		t.Error("the mark survived a command")
	}
	// A fixed directory has a history corral does not know.
	fixed, err := New(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	fh, err := fixed.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fh.Destroy(ctx) })
	if isIdle(fh.ID()) {
		t.Error("a fixed directory is marked idle")
	}
}
