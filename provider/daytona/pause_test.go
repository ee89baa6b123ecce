package daytona_test

import (
	"context"
	"testing"
	"time"

	"github.com/d10ffeed/corral/provider/daytona"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store/memstore"
)

// TestIdlePauseThenEnsure: Daytona is a sandbox.Pauser (stop) and a
// PauseReporter (the sandbox's state, read without starting it): the idle
// reaper stops a sandbox on an injected clock, a second pause sends no
// second stop, the next ensure starts the same sandbox with its files, and
// a sandbox that is gone is NotFound.
func TestIdlePauseThenEnsure(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // hang guard
	t.Cleanup(cancel)
	f := newFake(t)
	raw, _ := newProvider(t, f, daytona.Options{})
	p := sandbox.Guard(raw, sandbox.GuardOptions{})
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	m := &ensure.Manager{Instances: st, Locker: st, Now: func() time.Time { return now }}
	def := &sandbox.Definition{ID: "pause", Provider: p, Lifecycle: sandbox.Lifecycle{Snapshot: sandbox.SnapshotNone,
		Idle: sandbox.Idle{Pause: 10 * time.Minute, Destroy: time.Hour}}}
	res, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Handle.ID()
	if err := res.Handle.FS().WriteFile(ctx, "f.txt", []byte("before\n")); err != nil {
		t.Fatal(err)
	}
	var pr sandbox.PauseReporter
	if !sandbox.ProviderAs(p, &pr) {
		t.Fatal("the guarded Daytona provider is not a PauseReporter")
	}
	if paused, err := pr.Paused(ctx, id); err != nil || paused {
		t.Fatalf("a started sandbox: paused %v, %v", paused, err)
	}
	now = now.Add(10 * time.Minute)
	rep, err := m.ReapIdle(ctx, def, ensure.IdleOptions{})
	if err != nil || rep.Paused != 1 {
		t.Fatalf("reap: %+v, %v", rep, err)
	}
	if paused, err := pr.Paused(ctx, id); err != nil || !paused || f.SandboxState(id) != "stopped" {
		t.Fatalf("after the reap: paused %v (fake state %q), %v", paused, f.SandboxState(id), err)
	}
	var pz sandbox.Pauser
	if !sandbox.As(res.Handle, &pz) {
		t.Fatal("the Daytona handle is not a Pauser")
	}
	stops := f.Count("stop")
	if err := pz.Pause(ctx); err != nil || f.Count("stop") != stops {
		t.Fatalf("pausing a stopped sandbox: %v, %d more stops", err, f.Count("stop")-stops)
	}
	again, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"})
	if err != nil || again.Outcome != ensure.Resumed || again.Handle.ID() != id {
		t.Fatalf("ensure after the pause: %v, %v", again.Outcome, err)
	}
	got, err := again.Handle.FS().ReadFile(ctx, "f.txt")
	if err != nil || string(got) != "before\n" || f.SandboxState(id) != "started" {
		t.Fatalf("after the start: %q, %v (state %q)", got, err, f.SandboxState(id))
	}
	if _, err := pr.Paused(ctx, "no-such-sandbox"); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("Paused of a gone sandbox: %v, want NotFound", err)
	}
	t.Logf("stopped by the reaper (%d stop), reported paused, started by ensure with f.txt intact", stops)
}
