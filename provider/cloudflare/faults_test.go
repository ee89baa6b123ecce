package cloudflare_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/cloudflare"
	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// TestCreateAcceptedThen504: the bridge made the sandbox and the answer
// was a 504; the provider looks it up by id and returns it: exactly one
// sandbox, and Destroy leaves none.
func TestCreateAcceptedThen504(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, cloudflare.Options{})
	in := s.Inject("create", fakecloud.Fault{Accept: true, Status: http.StatusGatewayTimeout})
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "accepted-504"})
	if err != nil {
		t.Fatal(err)
	}
	n := len(s.Sandboxes("", nil))
	t.Logf("create hits %d, lookups %d, sandboxes %d", in.Hits(), s.Count("get"), n)
	if in.Hits() != 1 || n != 1 || h.ID() != "accepted-504" {
		t.Fatalf("hits %d, sandboxes %d, id %q", in.Hits(), n, h.ID())
	}
	if err := h.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Sandboxes("", nil)); n != 0 {
		t.Fatalf("%d sandboxes left after Destroy", n)
	}
}

// TestDroppedExecStream: the exec socket drops mid-output; Exec is
// Unavailable at once (the bridge has no process table to ask).
func TestDroppedExecStream(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, cloudflare.Options{})
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "drop"})
	if err != nil {
		t.Fatal(err)
	}
	in := s.Inject("exec", fakecloud.Fault{DropAfter: 100})
	_, err = h.Exec(ctx, sandbox.Command{Shell: "head -c 100000 /dev/zero"})
	t.Logf("drops %d: %v", in.Drops(), err)
	if sandbox.CodeOf(err) != sandbox.Unavailable || in.Drops() != 1 {
		t.Fatalf("code %v, drops %d", sandbox.CodeOf(err), in.Drops())
	}
	res, err := h.Exec(ctx, sandbox.Command{Shell: "echo after"})
	if err != nil || string(res.Stdout) != "after\n" {
		t.Fatalf("next exec: %v %+v", err, res)
	}
}

// TestManaged: list, prune (dry run, KeepRunning, age) and ping.
func TestManaged(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, cloudflare.Options{})
	m := cloudflare.Managed{Provider: p}
	for _, id := range []string{"m-1", "m-2"} {
		if _, err := p.Create(ctx, sandbox.CreateOptions{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.CreateSandbox("not-corrals", nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := m.ListSandboxes(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("list %+v, %v", list, err)
	}
	for _, o := range []registry.PruneOptions{{DryRun: true}, {KeepRunning: true}, {OlderThan: time.Hour}} {
		rep, err := m.Prune(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(s.Sandboxes("", nil)); n != 3 {
			t.Fatalf("prune %+v removed sandboxes (%d left)", o, n)
		}
		t.Logf("prune %+v: would remove %v", o, rep.Sandboxes)
	}
	rep, err := m.Prune(ctx, registry.PruneOptions{})
	if err != nil || len(rep.Sandboxes) != 2 {
		t.Fatalf("prune: %+v %v", rep, err)
	}
	if left := s.Sandboxes("", nil); len(left) != 1 || left[0].Name != "not-corrals" {
		t.Fatalf("left %d sandboxes", len(left))
	}
}
