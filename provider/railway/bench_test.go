package railway_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/railway"
	"github.com/d10ffeed/corral/provider/railway/railwayfake"
	"github.com/d10ffeed/corral/sandbox"
)

// requests is every request the fake served: GraphQL calls, exec sockets
// and files sockets.
func requests(f *railwayfake.Fake) int {
	return f.Count("graphql") + f.Count("exec") + f.Count("files")
}

// TestRequestCounts counts the fake's requests (GraphQL calls and sockets
// opened) for corral's create, exec, write and read, and the official
// SDK's for the same operations (testdata/sdkcount.mjs against another
// fake; its create is Sandbox.create plus files.mkdir of the workspace, as
// corral's create makes its root). corral opens one socket per operation;
// the SDK keeps a files socket open between calls, so its warm write and
// read cost nothing new: corral is held to the SDK's cold counts (a fresh
// handle's first write and read).
func TestRequestCounts(t *testing.T) {
	f := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, f, railway.Options{})
	count := func(fn func() error) int {
		t.Helper()
		before := requests(f)
		if err := fn(); err != nil {
			t.Fatal(err)
		}
		return requests(f) - before
	}
	var h sandbox.Handle
	create := count(func() (err error) { h, err = p.Create(ctx, sandbox.CreateOptions{}); return err })
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	execN := count(func() error { _, err := h.Exec(ctx, sandbox.Command{Shell: "echo hi"}); return err })
	write := count(func() error { return h.FS().WriteFile(ctx, "f.txt", []byte("data")) })
	read := count(func() error { _, err := h.FS().ReadFile(ctx, "f.txt"); return err })

	sdk := map[string]int{}
	if _, err := exec.LookPath("node"); err != nil {
		testutil.Unavailable(t, "node is not installed: the SDK's counts need it")
	}
	dir := os.Getenv("CORRAL_AGENTS_DIR")
	if dir == "" {
		dir = "/opt/corral-agents"
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "railway", "package.json")); err != nil {
		testutil.Unavailable(t, "the railway SDK is not installed: run scripts/setup-agents.sh")
	}
	lines := runScript(t, newFake(t), "testdata/sdkcount.mjs")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sdk); err != nil {
		t.Fatalf("sdkcount.mjs: %v: %q", err, lines)
	}
	t.Logf("requests per operation, corral vs the SDK: create %d vs %d (create %d + mkdir %d), exec %d vs %d, write %d vs %d (%d on a files socket the SDK keeps open), read %d vs %d (%d warm)",
		create, sdk["create"]+sdk["mkdir"], sdk["create"], sdk["mkdir"], execN, sdk["exec"], write, sdk["coldWrite"], sdk["write"], read, sdk["coldRead"], sdk["read"])
	if create > sdk["create"]+sdk["mkdir"] || execN > sdk["exec"] || write > sdk["coldWrite"] || read > sdk["coldRead"] {
		t.Fatalf("more round trips than the SDK: create %d exec %d write %d read %d", create, execN, write, read)
	}
}
