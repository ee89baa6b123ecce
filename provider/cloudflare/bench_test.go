package cloudflare_test

import (
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/cloudflare"
	"github.com/d10ffeed/corral/provider/cloudflare/cloudflarefake"
	"github.com/d10ffeed/corral/sandbox"
)

var routes = []string{"health", "create", "list", "get", "delete", "env", "exec"}

func requests(s *cloudflarefake.Server) int {
	n := 0
	for _, r := range routes {
		n += s.Count(r)
	}
	return n
}

// TestRequestCounts counts the bridge requests corral makes for create,
// exec, write and read. The official SDK runs only inside a Worker, so its
// count is the SDK calls the bridge makes for the same operations (create:
// mkdir 1; exec: exec 1; write: writeFile 1 + exec 1 for a staged stdin;
// read: exec 1), which the bridge's source shows; each bridge request is
// at most that many SDK calls.
func TestRequestCounts(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, cloudflare.Options{})
	count := func(f func() error) int {
		t.Helper()
		before := requests(s)
		if err := f(); err != nil {
			t.Fatal(err)
		}
		return requests(s) - before
	}
	var h sandbox.Handle
	create := count(func() (err error) { h, err = p.Create(ctx, sandbox.CreateOptions{ID: "counts"}); return })
	exec := count(func() error { _, err := h.Exec(ctx, sandbox.Command{Shell: "echo hi"}); return err })
	write := count(func() error { return h.FS().WriteFile(ctx, "a.txt", []byte("data")) })
	read := count(func() error { _, err := h.FS().ReadFile(ctx, "a.txt"); return err })
	t.Logf("corral's bridge requests: create %d, exec %d, write %d, read %d; the SDK calls behind them in the bridge: create 1 (mkdir), exec 1, write 2 (writeFile + exec), read 1", create, exec, write, read)
	for name, n := range map[string]int{"create": create, "exec": exec, "write": write, "read": read} {
		if n != 1 {
			t.Errorf("%s took %d bridge requests, want 1", name, n)
		}
	}
}
