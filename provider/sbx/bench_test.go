package sbx_test

import (
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/sbx"
	"github.com/d10ffeed/corral/provider/sbx/sbxfake"
	"github.com/d10ffeed/corral/sandbox"
)

// TestRequestCounts counts the sbx invocations of corral's create, exec,
// write and read. The "SDK" here is the CLI itself: a user's own `sbx
// create`, `sbx exec`, and a write and a read through `sbx exec` are one
// invocation each, and corral must not need more.
func TestRequestCounts(t *testing.T) {
	f := newFake(t)
	p := newProvider(t, f, sbx.Options{})
	ctx := testutil.HangGuard(t)
	count := func() int { c, _ := sbxfake.Calls(f.state); return len(c) }
	steps := []struct {
		name string
		do   func(h sandbox.Handle) error
	}{
		{"exec", func(h sandbox.Handle) error { _, err := h.Exec(ctx, sandbox.Command{Shell: "echo hi"}); return err }},
		{"write", func(h sandbox.Handle) error { return h.FS().WriteFile(ctx, "a.txt", []byte("x")) }},
		{"read", func(h sandbox.Handle) error { _, err := h.FS().ReadFile(ctx, "a.txt"); return err }},
	}
	before := count()
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "counts"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Destroy(testutil.HangGuard(t), h.ID()) })
	got := map[string]int{"create": count() - before}
	for _, s := range steps {
		before = count()
		if err := s.do(h); err != nil {
			t.Fatal(s.name, err)
		}
		got[s.name] = count() - before
	}
	for op, n := range got {
		if n != 1 {
			t.Errorf("%s took %d sbx invocations, the CLI's own is 1", op, n)
		}
	}
	t.Logf("sbx invocations: corral %v; the CLI by hand: create 1, exec 1, write 1, read 1", got)
}
