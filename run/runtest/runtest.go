// Package runtest is the conformance suite of durable runs: takeover with
// exactly-once delivery, fencing of superseded drivers, cancel, and the
// reaper. It runs against any provider and any store; corral runs it
// against local and Docker, and against memory, SQLite and PostgreSQL.
package runtest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store"
)

// Harness says what to run the suite against.
type Harness struct {
	// Provider makes the sandboxes.
	Provider sandbox.Provider
	// Store returns a fresh, empty store for one case.
	Store func(t *testing.T) store.Store
}

// Run runs the takeover and reaper suites. Every case has a store and
// sandboxes of its own and runs as a parallel subtest (bounded by go
// test's -parallel), as the runs of many users share one provider; call
// Run last in its test.
func Run(t *testing.T, h Harness) {
	s := &suite{h: h}
	par := func(f func(*testing.T)) func(*testing.T) {
		return func(t *testing.T) { t.Parallel(); f(t) }
	}
	t.Run("Takeover", func(t *testing.T) {
		t.Parallel()
		t.Run("ExactlyOnceMidStream", par(s.testExactlyOnce))
		t.Run("SupersededDriverIsFenced", par(s.testFenced))
		t.Run("ConcurrentAttachers", par(s.testConcurrentAttach))
		t.Run("TerminalRunIsNotResurrected", par(s.testTerminal))
		t.Run("UnknownRun", par(s.testUnknown))
		t.Run("CancelDetachedRun", par(s.testCancelDetached))
	})
	t.Run("Reaper", func(t *testing.T) {
		t.Parallel()
		t.Run("FinalizesFinishedDetachedRun", par(s.testReapFinalize))
		t.Run("LeavesProducingRunAlone", par(s.testReapProducing))
		t.Run("ExpiresAbandonedRun", par(s.testReapExpire))
		t.Run("LeavesStartingRunAlone", par(s.testReapStarting))
		t.Run("OneBadRunDoesNotStopThePass", par(s.testReapBadRun))
		t.Run("OrphanOfADeadDriver", par(s.testReapOrphan))
	})
}

type suite struct{ h Harness }

type fixture struct {
	t     *testing.T
	ctx   context.Context
	st    store.Store
	def   *sandbox.Definition
	clock atomic.Int64 // offset added to the real time, in ns
}

func (s *suite) fixture(t *testing.T) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	st := s.h.Store(t)
	f := &fixture{t: t, ctx: ctx, st: st, def: &sandbox.Definition{ID: "runtest", Provider: s.h.Provider}}
	return f
}

func (f *fixture) now() time.Time { return time.Now().Add(time.Duration(f.clock.Load())) }

// runner is one process's view: several runners on one store stand in for
// several hosts.
func (f *fixture) runner() *run.Runner {
	f.t.Helper()
	r, err := run.New(f.st, []*sandbox.Definition{f.def}, []harness.Harness{command.Harness{}}, run.Options{
		LeaseTTL: 2 * time.Second, PollInterval: 50 * time.Millisecond, LogPollInterval: 20 * time.Millisecond,
		CancelCheck: 100 * time.Millisecond, Now: f.now, FirstByteTimeout: 15 * time.Second, // generous for a loaded engine, yet within the reaper's 30 s budget (LeavesStartingRunAlone)
	})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func (f *fixture) start(r *run.Runner, script string) store.Run {
	f.t.Helper()
	rec, err := r.Start(f.ctx, run.StartRequest{Definition: f.def.ID, Thread: "thread-" + f.t.Name(), Harness: command.Name, Args: []string{"sh", "-c", script}})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		m := r.Ensure()
		_ = m.Destroy(ctx, f.def, sandboxReq(rec))
	})
	return rec
}

func sandboxReq(rec store.Run) ensure.Request {
	return ensure.Request{Thread: rec.ThreadID, Run: rec.ID, Tenant: rec.Tenant}
}

// waitEvents follows until n events are stored.
func (f *fixture) waitEvents(r *run.Runner, id string, n int64) {
	f.t.Helper()
	ctx, stop := context.WithCancel(f.ctx)
	defer stop()
	_ = r.Follow(ctx, id, 0, func(e store.Event) error {
		if e.Seq >= n {
			stop()
		}
		return nil
	})
	if f.ctx.Err() != nil {
		f.t.Fatalf("never saw %d events", n)
	}
}

// lines reads the stored log and checks its sequence numbers are dense.
func (f *fixture) lines(id string) ([]string, []event.Event) {
	f.t.Helper()
	evs, err := f.st.ReadEvents(f.ctx, id, 0, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	var texts []string
	var all []event.Event
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			f.t.Fatalf("event %d has sequence number %d", i+1, e.Seq)
		}
		ev, err := event.Unmarshal(e.Data)
		if err != nil {
			f.t.Fatal(err)
		}
		all = append(all, ev)
		if ev.Type == event.TextMessageContent {
			texts = append(texts, strings.TrimSuffix(ev.Delta, "\n"))
		}
	}
	return texts, all
}

func numbered(n int) string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(i + 1)
	}
	return strings.Join(out, ",")
}

func (f *fixture) record(id string) store.Run {
	f.t.Helper()
	rec, ok, err := f.st.GetRun(f.ctx, id)
	if err != nil || !ok {
		f.t.Fatalf("GetRun(%s): %v %v", id, ok, err)
	}
	return rec
}

const slowCount = `for i in $(seq 1 120); do echo $i; sleep 0.01; done`

func (s *suite) testExactlyOnce(t *testing.T) {
	f := s.fixture(t)
	a, b := f.runner(), f.runner()
	rec := f.start(a, slowCount)
	f.waitEvents(a, rec.ID, 30)
	if err := a.Detach(f.ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	var delivered []int64
	if err := b.Attach(f.ctx, rec.ID, 0, func(e store.Event) error {
		delivered = append(delivered, e.Seq)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, s := range delivered {
		if s != int64(i+1) {
			t.Fatalf("attach delivered %d as its event %d", s, i+1)
		}
	}
	texts, all := f.lines(rec.ID)
	if strings.Join(texts, ",") != numbered(120) {
		t.Fatalf("the log holds %v", texts)
	}
	if all[len(all)-1].Type != event.RunFinished {
		t.Errorf("last event %s", all[len(all)-1].Type)
	}
	_ = b.Wait(f.ctx, rec.ID)
	final := f.record(rec.ID)
	if final.Status != store.RunCompleted || final.DriverEpoch != 2 || !final.DetachedSince.IsZero() {
		t.Errorf("record %+v", final)
	}
}

func (s *suite) testFenced(t *testing.T) {
	f := s.fixture(t)
	a, b := f.runner(), f.runner()
	rec := f.start(a, slowCount)
	f.waitEvents(a, rec.ID, 20)
	// Another host claims the run while a is still driving (a paused host
	// whose lease lapsed, say): a's next append must be refused.
	cur := f.record(rec.ID)
	if _, err := f.st.ClaimRun(f.ctx, rec.ID, cur.DriverEpoch); err != nil {
		t.Fatal(err)
	}
	if err := a.Wait(f.ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	mid := f.record(rec.ID)
	if mid.Status != store.RunRunning {
		t.Fatalf("a superseded driver wrote a terminal status: %+v", mid)
	}
	closed, _ := f.st.LogClosed(f.ctx, rec.ID)
	if closed {
		t.Fatal("a superseded driver closed the log")
	}
	if err := b.Attach(f.ctx, rec.ID, 0, func(store.Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	texts, _ := f.lines(rec.ID)
	if strings.Join(texts, ",") != numbered(120) {
		t.Fatalf("the log holds %v", texts)
	}
	if got := f.record(rec.ID); got.Status != store.RunCompleted || got.DriverEpoch != 3 {
		t.Errorf("record %+v", got)
	}
}

func (s *suite) testConcurrentAttach(t *testing.T) {
	f := s.fixture(t)
	a := f.runner()
	rec := f.start(a, slowCount)
	f.waitEvents(a, rec.ID, 10)
	if err := a.Detach(f.ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	attachers := []*run.Runner{f.runner(), f.runner(), f.runner()}
	var wg sync.WaitGroup
	counts := make([]int, len(attachers))
	for i, r := range attachers {
		wg.Go(func() {
			if err := r.Attach(f.ctx, rec.ID, 0, func(store.Event) error { counts[i]++; return nil }); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	texts, all := f.lines(rec.ID)
	if strings.Join(texts, ",") != numbered(120) {
		t.Fatalf("the log holds %v", texts)
	}
	for i, c := range counts {
		if c != len(all) {
			t.Errorf("attacher %d saw %d events, want %d", i, c, len(all))
		}
	}
}

func (s *suite) testTerminal(t *testing.T) {
	f := s.fixture(t)
	a, b := f.runner(), f.runner()
	rec := f.start(a, "echo done")
	if err := a.Follow(f.ctx, rec.ID, 0, func(store.Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait(f.ctx, rec.ID)
	before := f.record(rec.ID)
	n := 0
	if err := b.Attach(f.ctx, rec.ID, 0, func(store.Event) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	after := f.record(rec.ID)
	if after.DriverEpoch != before.DriverEpoch || after.Status != store.RunCompleted || n == 0 {
		t.Errorf("attaching to a finished run changed it: %+v -> %+v (%d events)", before, after, n)
	}
}

func (s *suite) testUnknown(t *testing.T) {
	f := s.fixture(t)
	err := f.runner().Attach(f.ctx, "run-does-not-exist", 0, func(store.Event) error { return nil })
	if sandbox.CodeOf(err) != sandbox.NotFound {
		t.Errorf("got %v, want NotFound", err)
	}
}

func (s *suite) testCancelDetached(t *testing.T) {
	f := s.fixture(t)
	a, b := f.runner(), f.runner()
	rec := f.start(a, `echo up; ( while :; do sleep 0.05; done ) & wait`)
	f.waitEvents(a, rec.ID, 3)
	if err := a.Detach(f.ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if _, err := b.Cancel(f.ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.Follow(f.ctx, rec.ID, 0, func(store.Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	t.Logf("cancel took %v", time.Since(begin)) // a figure, not a verdict
	_ = b.Wait(f.ctx, rec.ID)
	if got := f.record(rec.ID); got.Status != store.RunCancelled {
		t.Errorf("status %s", got.Status)
	}
	_, all := f.lines(rec.ID)
	if last := all[len(all)-1]; !last.Cancelled() {
		t.Errorf("last event %+v", last)
	}
}

func (s *suite) testReapFinalize(t *testing.T) {
	f := s.fixture(t)
	a, reaper := f.runner(), f.runner()
	rec := f.start(a, "echo one; echo two; sleep 0.5; exit 4")
	if err := a.WaitStarted(f.ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if err := a.Detach(f.ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	detachedAt := f.record(rec.ID).DetachedSince
	waitFinished(t, f, reaper, rec)
	rep, err := reaper.Reap(f.ctx, run.ReapOptions{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Count(run.ReapFinalized) != 1 {
		t.Fatalf("report %+v", rep)
	}
	got := f.record(rec.ID)
	if got.Status != store.RunFailed || got.ExitCode == nil || *got.ExitCode != 4 {
		t.Errorf("record %+v", got)
	}
	texts, _ := f.lines(rec.ID)
	if strings.Join(texts, ",") != "one,two" {
		t.Errorf("log %v", texts)
	}
	_ = detachedAt
	again, err := reaper.Reap(f.ctx, run.ReapOptions{TTL: time.Hour})
	if err != nil || len(again.Runs) != 0 {
		t.Errorf("a second pass: %+v %v", again, err)
	}
}

// waitFinished waits until the run's journal shows its exit.
func waitFinished(t *testing.T, f *fixture, r *run.Runner, rec store.Run) {
	t.Helper()
	res, ok, err := r.Ensure().EnsureExisting(f.ctx, f.def, sandboxReq(rec))
	if err != nil || !ok {
		t.Fatalf("sandbox: %v %v", ok, err)
	}
	p, _ := journal.PathsFor("", rec.ID)
	for {
		st, err := journal.Probe(f.ctx, res.Handle, p, rec.JournalNonce)
		if err != nil {
			t.Fatal(err)
		}
		if st.Finished {
			return
		}
		select {
		case <-f.ctx.Done():
			t.Fatal("the agent never finished")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *suite) testReapProducing(t *testing.T) {
	f := s.fixture(t)
	a, reaper := f.runner(), f.runner()
	rec := f.start(a, "echo up; sleep 30")
	f.waitEvents(a, rec.ID, 3)
	if err := a.Detach(f.ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	before := f.record(rec.ID)
	last, _ := f.st.LastSeq(f.ctx, rec.ID)
	rep, err := reaper.Reap(f.ctx, run.ReapOptions{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Count(run.ReapProducing) != 1 {
		t.Fatalf("report %+v", rep)
	}
	after := f.record(rec.ID)
	nowLast, _ := f.st.LastSeq(f.ctx, rec.ID)
	if after.DriverEpoch != before.DriverEpoch || !after.DetachedSince.Equal(before.DetachedSince) || nowLast != last || after.Status != store.RunRunning {
		t.Errorf("the reaper touched a producing run: %+v -> %+v, events %d -> %d", before, after, last, nowLast)
	}
}

func (s *suite) testReapExpire(t *testing.T) {
	f := s.fixture(t)
	a, reaper := f.runner(), f.runner()
	rec := f.start(a, "echo up; sleep 60")
	f.waitEvents(a, rec.ID, 3)
	if err := a.Detach(f.ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(int64(2 * time.Hour))
	rep, err := reaper.Reap(f.ctx, run.ReapOptions{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Count(run.ReapExpired) != 1 {
		t.Fatalf("report %+v", rep)
	}
	if got := f.record(rec.ID); got.Status != store.RunCancelled {
		t.Errorf("status %s", got.Status)
	}
}

func (s *suite) testReapStarting(t *testing.T) {
	f := s.fixture(t)
	a, reaper := f.runner(), f.runner()
	// A run whose host died after its sandbox was made and before the
	// agent started: the sandbox exists, the journal does not.
	rec := f.start(a, "true")
	_ = a.Wait(f.ctx, rec.ID)
	orphan := store.Run{ID: run.NewID("run"), ThreadID: rec.ThreadID, DefinitionID: f.def.ID, Harness: command.Name,
		Status: store.RunRunning, JournalNonce: journal.NewNonce(), DetachedSince: f.now()}
	if err := f.st.CreateRun(f.ctx, orphan); err != nil {
		t.Fatal(err)
	}
	rep, err := reaper.Reap(f.ctx, run.ReapOptions{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Count(run.ReapStarting) != 1 {
		t.Fatalf("report %+v", rep)
	}
	if got := f.record(orphan.ID); got.Status != store.RunRunning || got.DriverEpoch != 0 {
		t.Errorf("the reaper touched a starting run: %+v", got)
	}
	// Once it is old enough, it is expired.
	f.clock.Add(int64(2 * time.Hour))
	rep, err = reaper.Reap(f.ctx, run.ReapOptions{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.record(orphan.ID); !got.Status.Terminal() {
		t.Errorf("an expired, never-started run stays %s (%+v)", got.Status, rep)
	}
}

func (s *suite) testReapBadRun(t *testing.T) {
	f := s.fixture(t)
	a, reaper := f.runner(), f.runner()
	bad := store.Run{ID: run.NewID("run"), ThreadID: "t-bad", DefinitionID: "no-such-definition", Harness: command.Name,
		Status: store.RunRunning, JournalNonce: journal.NewNonce(), DetachedSince: f.now().Add(-time.Minute)}
	if err := f.st.CreateRun(f.ctx, bad); err != nil {
		t.Fatal(err)
	}
	rec := f.start(a, "echo fine")
	if err := a.WaitStarted(f.ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if err := a.Detach(f.ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	waitFinished(t, f, reaper, rec)
	rep, err := reaper.Reap(f.ctx, run.ReapOptions{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Count(run.ReapFailed) != 1 || rep.Count(run.ReapFinalized) != 1 {
		t.Errorf("report %+v", rep)
	}
}

func (s *suite) testReapOrphan(t *testing.T) {
	f := s.fixture(t)
	a, reaper := f.runner(), f.runner()
	// A driver that died without detaching: its run is running, never
	// detached, and nobody holds its lease.
	rec := f.start(a, "echo orphan; exit 0")
	if err := a.WaitStarted(f.ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if err := a.Detach(f.ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	epoch := f.record(rec.ID).DriverEpoch
	if _, err := f.st.UpdateRun(f.ctx, rec.ID, store.RunPatch{DetachedSince: store.Clear[time.Time](), IfEpoch: &epoch}); err != nil {
		t.Fatal(err)
	}
	waitFinished(t, f, reaper, rec)
	f.clock.Add(int64(time.Minute)) // past the lease TTL since its last update
	rep, err := reaper.Reap(f.ctx, run.ReapOptions{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Count(run.ReapFinalized) != 1 {
		t.Fatalf("report %+v", rep)
	}
	if got := f.record(rec.ID); got.Status != store.RunCompleted {
		t.Errorf("status %s", got.Status)
	}
}
