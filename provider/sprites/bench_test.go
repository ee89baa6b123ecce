package sprites_test

import (
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/sprites"
	"github.com/d10ffeed/corral/sandbox"
)

// TestRequestCounts counts the fake's requests for corral's create, exec,
// write and read, and the official SDK's for the same operations
// (createSprite: 1; execFile: 1 WebSocket; filesystem writeFile: 1;
// readFile: 1), and logs both.
func TestRequestCounts(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, sprites.Options{})
	before := s.Requests()
	h, err := p.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(ctx) })
	create := s.Requests() - before
	before = s.Requests()
	if _, err := h.Exec(ctx, sandbox.Command{Shell: "echo hi"}); err != nil {
		t.Fatal(err)
	}
	exec := s.Requests() - before
	before = s.Requests()
	if err := h.FS().WriteFile(ctx, "f.txt", []byte("data")); err != nil {
		t.Fatal(err)
	}
	write := s.Requests() - before
	before = s.Requests()
	if _, err := h.FS().ReadFile(ctx, "f.txt"); err != nil {
		t.Fatal(err)
	}
	read := s.Requests() - before
	t.Logf("requests per operation, corral vs the SDK: create %d vs 1 (create, then one exec that makes the workspace and reads the default environment), exec %d vs 1, write %d vs 1, read %d vs 1", create, exec, write, read)
	if create > 2 || exec > 1 || write > 1 || read > 1 {
		t.Fatalf("more round trips than the design: create %d exec %d write %d read %d", create, exec, write, read)
	}
}
