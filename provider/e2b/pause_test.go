package e2b_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/d10ffeed/corral/provider/e2b"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store/memstore"
)

// TestIdlePauseThenEnsure: E2B is a sandbox.Pauser (pause without memory)
// and a PauseReporter (the sandbox's state, read without waking it): the
// idle reaper pauses a sandbox on an injected clock, the next ensure wakes
// the same sandbox with its files, and a sandbox that is gone is NotFound.
func TestIdlePauseThenEnsure(t *testing.T) {
	ctx := hangGuard(t)
	f := newFake(t)
	raw, _ := newProvider(t, f, e2b.Options{Timeout: 10 * time.Minute})
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
	if err := res.Handle.FS().WriteFile(ctx, "f.txt", []byte("before\n")); err != nil {
		t.Fatal(err)
	}
	var pr sandbox.PauseReporter
	if !sandbox.ProviderAs(p, &pr) {
		t.Fatal("the guarded E2B provider is not a PauseReporter")
	}
	if paused, err := pr.Paused(ctx, res.Handle.ID()); err != nil || paused {
		t.Fatalf("a running sandbox: paused %v, %v", paused, err)
	}
	now = now.Add(10 * time.Minute)
	rep, err := m.ReapIdle(ctx, def, ensure.IdleOptions{})
	if err != nil || rep.Paused != 1 {
		t.Fatalf("reap: %+v, %v", rep, err)
	}
	if paused, err := pr.Paused(ctx, res.Handle.ID()); err != nil || !paused || !f.Paused(res.Handle.ID()) {
		t.Fatalf("after the reap: paused %v (fake %v), %v", paused, f.Paused(res.Handle.ID()), err)
	}
	var memory *bool
	for _, b := range f.Bodies() {
		if b.Route == "pause" {
			var body e2b.PauseRequest
			if err := json.Unmarshal(b.Body, &body); err != nil {
				t.Fatal(err)
			}
			memory = body.Memory
		}
	}
	if memory == nil || *memory {
		t.Fatalf("the pause asked for memory %v, want false (the file system only)", memory)
	}
	var pz sandbox.Pauser
	if !sandbox.As(res.Handle, &pz) {
		t.Fatal("the E2B handle is not a Pauser")
	}
	if err := pz.Pause(ctx); err != nil {
		t.Fatalf("pausing a paused sandbox: %v", err)
	}
	again, err := m.Ensure(ctx, def, ensure.Request{Thread: "t"})
	if err != nil || again.Outcome != ensure.Resumed || again.Handle.ID() != res.Handle.ID() {
		t.Fatalf("ensure after the pause: %v, %v", again.Outcome, err)
	}
	got, err := again.Handle.FS().ReadFile(ctx, "f.txt")
	if err != nil || string(got) != "before\n" || f.Paused(res.Handle.ID()) {
		t.Fatalf("after the wake: %q, %v (paused %v)", got, err, f.Paused(res.Handle.ID()))
	}
	if _, err := pr.Paused(ctx, "no-such-sandbox"); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("Paused of a gone sandbox: %v, want NotFound", err)
	}
	t.Logf("paused by the reaper (memory false), reported paused, resumed by ensure with f.txt intact")
}
