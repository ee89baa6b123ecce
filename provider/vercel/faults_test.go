package vercel_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/vercel"
	"github.com/d10ffeed/corral/provider/vercel/vercelfake"
	"github.com/d10ffeed/corral/sandbox"
)

// TestKillReachesTheTree: the API's own kill (POST …/cmd/{id}/kill, what
// the SDK's Command.kill sends, and what the reference never called)
// reaches one pid: a backgrounded grandchild keeps beating. The
// provider's kill (the process group, from a second command) stops it.
func TestKillReachesTheTree(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, vercel.Options{})
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "kill-case"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	beat := func(file string) (sandbox.Process, func() int64) {
		pr, err := h.Spawn(ctx, sandbox.Command{Shell: "(while :; do printf . >> " + file + "; sleep 0.05; done) >/dev/null 2>&1 & wait"})
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(h.WorkspaceRoot(), file)
		size := func() int64 {
			fi, err := os.Stat(path)
			if err != nil {
				return 0
			}
			return fi.Size()
		}
		for i := 0; i < 200 && size() < 2; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		return pr, size
	}
	frozen := func(size func() int64) bool {
		a := size()
		time.Sleep(400 * time.Millisecond) // a hang guard's pause, not the verdict's clock: the heartbeat ticks every 50 ms
		return size() == a
	}

	// The API's kill, as the SDK sends it: SIGKILL to the command.
	_, size := beat("native.hb")
	sid, cid, ok := s.LastCommand(h.ID())
	if !ok {
		t.Fatal("no command")
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", s.URL()+"/v2/sandboxes/sessions/"+sid+"/cmd/"+cid+"/kill?teamId="+vercelfake.Team, strings.NewReader(`{"signal":9}`))
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("native kill: %v %v", resp, err)
	}
	resp.Body.Close()
	nativeFrozen := frozen(size)
	// Clean the survivor up.
	_, _ = h.Exec(ctx, sandbox.Command{Shell: "pkill -f native.hb || true"})

	pr, size2 := beat("provider.hb")
	if err := pr.Kill(ctx, 0); err != nil {
		t.Fatal(err)
	}
	providerFrozen := frozen(size2)
	t.Logf("heartbeat after the API's kill: frozen=%v (bytes %d); after the provider's kill: frozen=%v (bytes %d)", nativeFrozen, size(), providerFrozen, size2())
	if nativeFrozen {
		t.Error("the fake's native kill stopped the grandchild: it no longer imitates the API's one-pid kill")
	}
	if !providerFrozen {
		t.Error("the provider's kill left the grandchild beating")
	}
}

// TestDroppedStream: the command stream dropped after some output is
// re-read from the logs endpoint, each byte delivered once, and the exit
// code asked for: the Exec still succeeds with the whole output.
func TestDroppedStream(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, vercel.Options{})
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "drop-case"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	in := s.Inject("run", fakecloud.Fault{DropAfter: 1000})
	res, err := h.Exec(ctx, sandbox.Command{Shell: `i=0; while [ $i -lt 500 ]; do echo "line $i"; i=$((i+1)); done; echo err >&2; exit 4`})
	if err != nil {
		t.Fatal(err)
	}
	want := ""
	for i := range 500 {
		want += "line " + strconv.Itoa(i) + "\n"
	}
	t.Logf("stream drops %d; stdout %d of %d bytes, stderr %q, exit %d; logs re-reads %d, exit asked %d",
		in.Drops(), len(res.Stdout), len(want), res.Stderr, res.ExitCode, s.Count("logs"), s.Count("command"))
	if in.Drops() != 1 || string(res.Stdout) != want || string(res.Stderr) != "err\n" || res.ExitCode != 4 {
		t.Fatalf("after a dropped stream: stdout %d bytes (want %d), stderr %q, exit %d", len(res.Stdout), len(want), res.Stderr, res.ExitCode)
	}
}
