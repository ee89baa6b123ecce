package blaxel_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/blaxel"
	"github.com/d10ffeed/corral/provider/blaxel/blaxelfake"
	"github.com/d10ffeed/corral/sandbox"
)

var routes = []string{"create", "list", "get", "delete", "getPreview", "createPreview", "createToken", "process", "processGet",
	"processLogs", "processStream", "processKill", "processStop", "fsGet", "fsPut", "fsDelete"}

// requests is every route's count on the fake.
func requests(s *blaxelfake.Server) int {
	n := 0
	for _, r := range routes {
		n += s.Count(r)
	}
	return n
}

// TestRequestCounts counts the fake's requests for corral's create, exec,
// write and read, and compares them with the official SDK's for the same
// operations, measured by sdkcheck.mjs against the same fake
// (createIfNotExists 1, process.exec 1, fs.write 1, fs.read 1).
func TestRequestCounts(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, blaxel.Options{})
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
	execN := count(func() error { _, err := h.Exec(ctx, sandbox.Command{Shell: "echo hi"}); return err })
	write := count(func() error { return h.FS().WriteFile(ctx, "f.txt", []byte("data")) })
	read := count(func() error { _, err := h.FS().ReadFile(ctx, "f.txt"); return err })
	sdk := map[string]int{"create": 1, "exec": 1, "write": 1, "read": 1}
	if _, err := exec.LookPath("node"); err == nil {
		if _, err := os.Stat(filepath.Join(sdkPath(), "package.json")); err == nil {
			out := runSDK(t, newFake(t))
			var got map[string]int
			if err := json.Unmarshal(out["requests"], &got); err == nil {
				for k := range sdk {
					sdk[k] = got[k]
				}
			}
		}
	}
	t.Logf("requests per operation, corral vs the SDK: create %d vs %d (create + the workspace's mkdir, one process), exec %d vs %d, write %d vs %d (stdin upload + command), read %d vs %d",
		create, sdk["create"], execN, sdk["exec"], write, sdk["write"], read, sdk["read"])
	if create > 2 || execN > sdk["exec"] || write > 2 || read > sdk["read"] {
		t.Fatalf("more round trips than the design: create %d exec %d write %d read %d", create, execN, write, read)
	}
}
