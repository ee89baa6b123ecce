package railway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/railway"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

// TestIdleDestroyedRun: Railway's file system is not durable (an idle
// sandbox is destroyed). A detached run whose sandbox the idle timeout
// destroyed (after its agent ended, its journal with it) is ended by the next runner that takes it over, its record
// failed with "the run's sandbox is gone"; the thread's next run gets a
// new sandbox (ensure re-bootstraps).
func TestIdleDestroyedRun(t *testing.T) {
	f := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, f, railway.Options{})
	if p.Capabilities().DurableFilesystem {
		t.Fatal("railway claims a durable file system")
	}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	def := &sandbox.Definition{ID: "rw", Provider: p}
	newRunner := func() *run.Runner {
		r, err := run.New(st, []*sandbox.Definition{def}, []harness.Harness{command.Harness{}}, run.Options{
			LeaseTTL: 2 * time.Second, PollInterval: 50 * time.Millisecond, LogPollInterval: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close(context.Background()) })
		return r
	}
	a := newRunner()
	rec, err := a.Start(ctx, run.StartRequest{Definition: def.ID, Thread: "idle", Harness: command.Name, Args: []string{"sh", "-c", "echo up; sleep 1"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.WaitStarted(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	first, _, err := st.GetRun(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Detach(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	// Railway's idle sweep, 31 minutes on, once the sandbox has no client
	// left: the agent's own exec socket closes when it exits, a second
	// on (the wait is bounded).
	var gone []string
	for i := 0; i < 400 && len(gone) == 0; i++ {
		gone = f.IdleSweep(ctx, time.Now().Add(31*time.Minute))
		if len(gone) == 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if len(gone) != 1 {
		t.Fatalf("the idle sweep destroyed %v", gone)
	}
	b := newRunner()
	if err := b.TakeOver(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	_ = b.Wait(ctx, rec.ID)
	got, _, err := st.GetRun(ctx, rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("run after its sandbox %s was destroyed idle: %s, %q", gone[0], got.Status, got.Error)
	if got.Status != store.RunFailed || !strings.Contains(got.Error, "sandbox is gone") {
		t.Fatalf("record %s %q, want failed saying the sandbox is gone", got.Status, got.Error)
	}
	next, err := b.Start(ctx, run.StartRequest{Definition: def.ID, Thread: "idle", Harness: command.Name, Args: []string{"sh", "-c", "echo again"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(ctx, next.ID); err != nil {
		t.Fatal(err)
	}
	again, _, err := st.GetRun(ctx, next.ID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the thread's next run: %s, exit %d, sandboxes live %d (first run's key %q)", again.Status, *again.ExitCode, f.Live(), first.SandboxKey)
	if again.Status != store.RunCompleted || f.Live() != 1 {
		t.Fatalf("next run %s with %d sandboxes live: ensure did not re-bootstrap", again.Status, f.Live())
	}
}
