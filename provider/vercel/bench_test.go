package vercel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/vercel"
	"github.com/d10ffeed/corral/provider/vercel/vercelfake"
	"github.com/d10ffeed/corral/sandbox"
)

var routes = []string{"create", "list", "get", "update", "delete", "session", "stop", "extend", "snapshot", "run", "command",
	"logs", "kill", "mkdir", "read", "write", "getSnapshot", "deleteSnapshot", "listSnapshots"}

// requests is every route's count on the fake.
func requests(s *vercelfake.Server) int {
	n := 0
	for _, r := range routes {
		n += s.Count(r)
	}
	return n
}

// TestRequestCounts counts the fake's requests for corral's create, exec,
// write and read, and compares them with the official SDK's for the same
// operations, measured by sdkcheck.mjs against the same fake (create 1,
// runCommand 1, writeFiles 1, readFileToBuffer 1).
func TestRequestCounts(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, vercel.Options{})
	count := func(f func() error) int {
		t.Helper()
		before := requests(s)
		if err := f(); err != nil {
			t.Fatal(err)
		}
		return requests(s) - before
	}
	var h sandbox.Handle
	create := count(func() (err error) { h, err = p.Create(ctx, sandbox.CreateOptions{}); return err })
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	exec := count(func() error { _, err := h.Exec(ctx, sandbox.Command{Shell: "echo hi"}); return err })
	write := count(func() error { return h.FS().WriteFile(ctx, "f.txt", []byte("data")) })
	read := count(func() error { _, err := h.FS().ReadFile(ctx, "f.txt"); return err })
	sdk := map[string]int{"create": 1, "exec": 1, "write": 1, "read": 1}
	if _, err := sdkDirOK(); err == nil {
		out := runSDK(t, newFake(t))
		raw := string(out["requests"])
		for k := range sdk {
			if i := strings.Index(raw, `"`+k+`":`); i >= 0 {
				var n int
				_, _ = fmtSscan(raw[i+len(k)+3:], &n)
				sdk[k] = n
			}
		}
	}
	t.Logf("requests per operation, corral vs the SDK: create %d vs %d (create, mkdir of the workspace, tolerating \"File exists\"), exec %d vs %d, write %d vs %d (stdin upload + command), read %d vs %d",
		create, sdk["create"], exec, sdk["exec"], write, sdk["write"], read, sdk["read"])
	if create > 2 || exec > sdk["exec"] || write > 2 || read > sdk["read"] {
		t.Fatalf("more round trips than the design: create %d exec %d write %d read %d", create, exec, write, read)
	}
}
