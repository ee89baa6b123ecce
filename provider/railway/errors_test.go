package railway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/provider/railway"
	"github.com/d10ffeed/corral/sandbox"
)

// TestErrors: a missing credential or environment names its variable; a
// bad token is PermissionDenied without the token in the message; network
// deny is refused before any call; a gone sandbox resumes as NotFound.
func TestErrors(t *testing.T) {
	f := newFake(t)
	for _, tc := range []struct {
		name string
		opts railway.Options
		want string
	}{
		{"no token", railway.Options{EnvironmentID: "e"}, "RAILWAY_API_TOKEN"},
		{"no environment", railway.Options{Token: "x"}, "RAILWAY_ENVIRONMENT_ID"},
		{"plain http off loopback", railway.Options{Token: "x", EnvironmentID: "e", Endpoint: "http://example.com/graphql/v2"}, "https"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := railway.New(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %s", err, tc.want)
			}
		})
	}
	ctx := context.Background()
	t.Run("bad token", func(t *testing.T) {
		p, _ := newProvider(t, f, railway.Options{Token: "wrong-secret-token"})
		_, err := p.Create(ctx, sandbox.CreateOptions{ID: "k"})
		if sandbox.CodeOf(err) != sandbox.PermissionDenied || strings.Contains(err.Error(), "wrong-secret-token") {
			t.Fatalf("got %v (code %v), want PermissionDenied without the token", err, sandbox.CodeOf(err))
		}
		t.Logf("bad token: %v", err)
	})
	t.Run("network deny", func(t *testing.T) {
		p, _ := newProvider(t, f, railway.Options{})
		before := f.Count("graphql")
		_, err := p.Create(ctx, sandbox.CreateOptions{ID: "k", Network: sandbox.NetworkDeny})
		if sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), "public egress") {
			t.Fatalf("got %v, want InvalidArgument naming public egress", err)
		}
		if n := f.Count("graphql") - before; n != 0 {
			t.Fatalf("%d GraphQL calls for a refused create", n)
		}
	})
	t.Run("idle destroyed resumes NotFound", func(t *testing.T) {
		p, _ := newProvider(t, f, railway.Options{})
		h, err := p.Create(ctx, sandbox.CreateOptions{ID: "idle-key", Env: map[string]string{"SECRET": "canary-77"}})
		if err != nil {
			t.Fatal(err)
		}
		vars := f.Vars(h.ID())
		if vars[railway.VarKey] != "idle-key" || vars[railway.VarManaged] != "1" || len(vars) != 2 {
			t.Fatalf("create-time variables %v: want only the marker and the key (no secret)", vars)
		}
		gone := f.IdleSweep(ctx, time.Now().Add(31*time.Minute))
		_, err = p.Resume(ctx, h.ID())
		if sandbox.CodeOf(err) != sandbox.NotFound {
			t.Fatalf("resume after idle: got %v, want NotFound", err)
		}
		t.Logf("idle sweep destroyed %d sandbox(es); resume: %v", len(gone), err)
	})
}

// TestHeartbeat: while a spawned process is live the handle heartbeats,
// and the idle sweep that would destroy an unwatched sandbox spares it
// (its last activity is recent).
func TestHeartbeat(t *testing.T) {
	f := newFake(t)
	ctx := context.Background()
	p, _ := newProvider(t, f, railway.Options{Heartbeat: 50 * time.Millisecond})
	h, err := p.Create(ctx, sandbox.CreateOptions{ID: "hb"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	pr, err := h.Spawn(ctx, sandbox.Command{Shell: "sleep 1"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second) // a hang guard, not the verdict
	for f.Heartbeats() < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := pr.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	n := f.Heartbeats()
	if n < 2 {
		t.Fatalf("%d heartbeats while the process ran", n)
	}
	t.Logf("heartbeats while a 1 s process ran: %d", n)
}
