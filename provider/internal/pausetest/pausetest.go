// Package pausetest checks a provider's idle pause end to end (for the
// providers that implement sandbox.Pauser and sandbox.PauseReporter): the
// idle reaper pauses a thread's sandbox on an injected clock, a second
// pause is a no-op, the thread's next ensure resumes the same sandbox with
// its files, and a sandbox that is gone is NotFound.
package pausetest

import (
	"context"
	"testing"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store/memstore"
)

// Checks are the provider-specific looks at its own state (its fake's),
// each optional.
type Checks struct {
	// Paused is called once the reaper paused sandbox id.
	Paused func(t *testing.T, id string)
	// Repaused is called after a second Pause of the paused sandbox.
	Repaused func(t *testing.T, id string)
	// Resumed is called once ensure resumed it.
	Resumed func(t *testing.T, id string)
	// Gone is a sandbox id that does not exist; default "no-such-sandbox".
	Gone string
}

// IdlePauseThenEnsure runs the check against p (guarded here).
func IdlePauseThenEnsure(ctx context.Context, t *testing.T, raw sandbox.Provider, c Checks) {
	t.Helper()
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
		t.Fatal("the guarded provider is not a sandbox.PauseReporter")
	}
	if paused, err := pr.Paused(ctx, id); err != nil || paused {
		t.Fatalf("a running sandbox: paused %v, %v", paused, err)
	}
	now = now.Add(10 * time.Minute)
	rep, err := m.ReapIdle(ctx, def, ensure.IdleOptions{})
	if err != nil || rep.Paused != 1 {
		t.Fatalf("reap: %+v, %v", rep, err)
	}
	if paused, err := pr.Paused(ctx, id); err != nil || !paused {
		t.Fatalf("after the reap: paused %v, %v", paused, err)
	}
	if c.Paused != nil {
		c.Paused(t, id)
	}
	var pz sandbox.Pauser
	if !sandbox.As(res.Handle, &pz) {
		t.Fatal("the handle is not a sandbox.Pauser")
	}
	if err := pz.Pause(ctx); err != nil {
		t.Fatalf("pausing a paused sandbox: %v", err)
	}
	if c.Repaused != nil {
		c.Repaused(t, id)
	}
	again, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"})
	if err != nil || again.Outcome != ensure.Resumed || again.Handle.ID() != id {
		t.Fatalf("ensure after the pause: %v, %v", again.Outcome, err)
	}
	if got, err := again.Handle.FS().ReadFile(ctx, "f.txt"); err != nil || string(got) != "before\n" {
		t.Fatalf("f.txt after the pause: %q, %v", got, err)
	}
	if paused, err := pr.Paused(ctx, id); err != nil || paused {
		t.Fatalf("after the resume: paused %v, %v", paused, err)
	}
	if c.Resumed != nil {
		c.Resumed(t, id)
	}
	gone := c.Gone
	if gone == "" {
		gone = "no-such-sandbox"
	}
	if _, err := pr.Paused(ctx, gone); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("Paused of a gone sandbox: %v, want NotFound", err)
	}
}
