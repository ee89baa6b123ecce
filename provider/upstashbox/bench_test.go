package upstashbox_test

import (
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/upstashbox"
	"github.com/d10ffeed/corral/provider/upstashbox/upstashboxfake"
	"github.com/d10ffeed/corral/sandbox"
)

// TestRequestCounts counts the fake's requests for corral's create,
// exec, write and read, and logs them beside the official SDK's for the
// same operation (from the SDK's source: create is POST /v2/box and a GET
// per 2 s poll; exec.command, files.write and files.read one request
// each). It fails if corral's exec, write or read takes more than the
// SDK's one request.
func TestRequestCounts(t *testing.T) {
	ctx := testutil.HangGuard(t)
	f := newFake(t)
	p, _ := newProvider(t, f, upstashbox.Options{})
	count := func(op string, sdk int, fn func()) int {
		before := f.Total()
		fn()
		n := f.Total() - before
		t.Logf("%-6s corral %d request(s), SDK %d", op, n, sdk)
		return n
	}
	var h sandbox.Handle
	count("create", 2, func() { h = create(t, ctx, p, sandbox.CreateOptions{ID: "counts"}) })
	for _, c := range []struct {
		op string
		fn func() error
	}{
		{"exec", func() error { _, err := h.Exec(ctx, sandbox.Command{Shell: "echo hi"}); return err }},
		{"write", func() error { return h.FS().WriteFile(ctx, "a.txt", []byte("hello")) }},
		{"read", func() error { _, err := h.FS().ReadFile(ctx, "a.txt"); return err }},
	} {
		var err error
		if n := count(c.op, 1, func() { err = c.fn() }); n > 1 {
			t.Errorf("%s took %d requests, the SDK 1", c.op, n)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

var _ = upstashboxfake.Workspace
