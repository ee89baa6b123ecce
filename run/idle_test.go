package run_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

// TestDecideIdle is the idle decision's table: live runs and unanswered
// approvals keep a sandbox whatever the clock says, idle counts from the
// last run's end, pause comes before destroy and only where the sandbox
// can pause.
func TestDecideIdle(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	inst := store.Instance{Key: "k", ThreadID: "t", DefinitionID: "d", ProviderSandboxID: "sb", UpdatedAt: t0.Add(-48 * time.Hour)}
	idle := sandbox.Lifecycle{Idle: sandbox.Idle{Pause: 10 * time.Minute, Destroy: 24 * time.Hour}}
	finished := func(id string, end time.Time) store.Run {
		return store.Run{ID: id, ThreadID: "t", DefinitionID: "d", Status: store.RunCompleted, CreatedAt: end.Add(-time.Minute), FinishedAt: end}
	}
	live := func(id string, detached bool) store.Run {
		r := store.Run{ID: id, ThreadID: "t", DefinitionID: "d", Status: store.RunRunning, CreatedAt: t0.Add(-72 * time.Hour), UpdatedAt: t0.Add(-72 * time.Hour)}
		if detached {
			r.DetachedSince = t0.Add(-72 * time.Hour)
		}
		return r
	}
	pending := func(runID string) []run.PendingApproval {
		return []run.PendingApproval{{RunID: runID, ApprovalID: "a1", RequestedAt: t0.Add(-48 * time.Hour)}}
	}
	withWait := idle
	withWait.Idle.ApprovalWait = time.Hour
	legacy := sandbox.Lifecycle{KeepAlive: 30 * time.Minute}
	none := idle
	none.Reuse = sandbox.ReuseNone
	noneInst := inst
	noneInst.LatestRunID = "mine"
	other := func(r store.Run, f func(*store.Run)) store.Run { f(&r); return r }
	cases := []struct {
		name      string
		lc        sandbox.Lifecycle
		inst      store.Instance
		runs      []store.Run
		pend      []run.PendingApproval
		now       time.Time
		paused    bool
		cantPause bool
		want      ensure.IdleAction
		reason    string
	}{
		{"no idle times", sandbox.Lifecycle{}, inst, nil, nil, t0, false, false, ensure.IdleKeep, "no idle times"},
		{"no sandbox", idle, store.Instance{Key: "k", ThreadID: "t"}, nil, nil, t0, false, false, ensure.IdleKeep, "no sandbox"},
		{"live attached run, days old", idle, inst, []store.Run{finished("r0", t0.Add(-72*time.Hour)), live("r1", false)}, nil, t0, false, false, ensure.IdleKeep, "live run r1"},
		{"live detached run", idle, inst, []store.Run{live("r1", true)}, nil, t0, false, false, ensure.IdleKeep, "live run r1"},
		{"live run even when paused", idle, inst, []store.Run{live("r1", true)}, nil, t0, true, false, ensure.IdleKeep, "live run r1"},
		{"finished 9m ago", idle, inst, []store.Run{finished("r1", t0.Add(-9*time.Minute))}, nil, t0, false, false, ensure.IdleKeep, "idle since run r1 ended"},
		{"finished 10m ago: pause", idle, inst, []store.Run{finished("r1", t0.Add(-10*time.Minute))}, nil, t0, false, false, ensure.IdlePause, ""},
		{"finished 10m ago, cannot pause", idle, inst, []store.Run{finished("r1", t0.Add(-10*time.Minute))}, nil, t0, false, true, ensure.IdleKeep, ""},
		{"paused already", idle, inst, []store.Run{finished("r1", t0.Add(-2*time.Hour))}, nil, t0, true, false, ensure.IdleKeep, ""},
		{"finished 24h ago: destroy", idle, inst, []store.Run{finished("r1", t0.Add(-24*time.Hour))}, nil, t0, true, false, ensure.IdleDestroy, ""},
		{"destroy without pause support", idle, inst, []store.Run{finished("r1", t0.Add(-25*time.Hour))}, nil, t0, false, true, ensure.IdleDestroy, ""},
		{"last run counts, not the first", idle, inst, []store.Run{finished("r2", t0.Add(-time.Minute)), finished("r1", t0.Add(-30*time.Hour))}, nil, t0, false, false, ensure.IdleKeep, "idle since run r2 ended"},
		{"record's UpdatedAt does not count", idle, inst, []store.Run{finished("r1", t0.Add(-time.Minute))}, nil, t0, false, false, ensure.IdleKeep, ""},
		{"no runs: the record's last use", idle, inst, nil, nil, t0, false, false, ensure.IdleDestroy, "record"},
		{"terminal without FinishedAt: its last write", idle, inst, []store.Run{{ID: "r1", ThreadID: "t", Status: store.RunFailed, UpdatedAt: t0.Add(-11 * time.Minute)}}, nil, t0, false, false, ensure.IdlePause, ""},
		{"approval pending, no cap, days later", idle, inst, []store.Run{finished("r1", t0.Add(-72*time.Hour))}, pending("r1"), t0, false, false, ensure.IdleKeep, "approval a1"},
		{"approval pending, within the cap", withWait, inst, []store.Run{finished("r1", t0.Add(-59*time.Minute))}, pending("r1"), t0, false, false, ensure.IdleKeep, "approval a1"},
		{"approval pending, cap passed 10m ago: pause", withWait, inst, []store.Run{finished("r1", t0.Add(-70*time.Minute))}, pending("r1"), t0, false, false, ensure.IdlePause, "wait for approval"},
		{"approval pending, cap passed 9m ago: keep", withWait, inst, []store.Run{finished("r1", t0.Add(-69*time.Minute))}, pending("r1"), t0, false, false, ensure.IdleKeep, "wait for approval"},
		{"approval of an earlier run was answered by the next", idle, inst, []store.Run{finished("r1", t0.Add(-48*time.Hour)), finished("r2", t0.Add(-25*time.Hour))}, pending("r1"), t0, false, false, ensure.IdleDestroy, "run r2"},
		{"keepAlive is the destroy time", legacy, inst, []store.Run{finished("r1", t0.Add(-30*time.Minute))}, nil, t0, false, false, ensure.IdleDestroy, ""},
		{"keepAlive, 29m", legacy, inst, []store.Run{finished("r1", t0.Add(-29*time.Minute))}, nil, t0, false, false, ensure.IdleKeep, ""},
		{"another tenant's live run does not count", idle, inst, []store.Run{finished("r1", t0.Add(-25*time.Hour)), other(live("x", true), func(r *store.Run) { r.Tenant = "other" })}, nil, t0, false, false, ensure.IdleDestroy, ""},
		{"another definition's live run does not count", idle, inst, []store.Run{finished("r1", t0.Add(-25*time.Hour)), other(live("x", true), func(r *store.Run) { r.DefinitionID = "e" })}, nil, t0, false, false, ensure.IdleDestroy, ""},
		{"reuse none: only its own run", none, noneInst, []store.Run{finished("mine", t0.Add(-25*time.Hour)), live("sibling", true)}, nil, t0, false, false, ensure.IdleDestroy, "run mine"},
		{"reuse none: its own run live", none, noneInst, []store.Run{live("mine", true)}, nil, t0, false, false, ensure.IdleKeep, "live run mine"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := run.DecideIdle(run.IdleInput{Now: c.now, Lifecycle: c.lc, Instance: c.inst, Runs: c.runs, Pending: c.pend, Paused: c.paused, CanPause: !c.cantPause})
			if d.Action != c.want || !strings.Contains(d.Reason, c.reason) {
				t.Fatalf("got %s (%s), want %s (%q)", d.Action, d.Reason, c.want, c.reason)
			}
		})
	}
}

// pausingLocal is the local provider with pauses kept in memory (local
// itself cannot pause: a host directory has nothing to stop), so the
// runner's idle reaping can be tested without a container engine.
type pausingLocal struct {
	*local.Provider
	mu     sync.Mutex
	paused map[string]bool
}

func (p *pausingLocal) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	h, err := p.Provider.Resume(ctx, id)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	delete(p.paused, id)
	p.mu.Unlock()
	return &pausingHandle{Handle: h, p: p}, nil
}

func (p *pausingLocal) Create(ctx context.Context, o sandbox.CreateOptions) (sandbox.Handle, error) {
	h, err := p.Provider.Create(ctx, o)
	if err != nil {
		return nil, err
	}
	return &pausingHandle{Handle: h, p: p}, nil
}

func (p *pausingLocal) Paused(_ context.Context, id string) (bool, error) {
	if _, err := os.Stat(id); err != nil {
		return false, sandbox.Errorf(sandbox.NotFound, "pausing", id, "gone")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused[id], nil
}

func (p *pausingLocal) isPaused(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused[id]
}

type pausingHandle struct {
	sandbox.Handle
	p *pausingLocal
}

func (h *pausingHandle) Unwrap() sandbox.Handle { return h.Handle }

func (h *pausingHandle) Pause(context.Context) error {
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	h.p.paused[h.ID()] = true
	return nil
}

// TestReapIdleSandboxes drives the reaper's idle step over four threads on
// an injected clock, with run records and events written to the store as
// a run would leave them: a run that ended with an approval request
// nobody answered keeps its sandbox past the keep-alive; one idle after
// its run is paused at pause and destroyed at destroy, the hook first; a
// failing hook keeps its sandbox; a live detached run's sandbox is never
// touched.
func TestReapIdleSandboxes(t *testing.T) {
	ctx := context.Background()
	lp, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	p := &pausingLocal{Provider: lp, paused: map[string]bool{}}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	def := &sandbox.Definition{ID: "d", Provider: sandbox.Guard(p, sandbox.GuardOptions{}),
		Lifecycle: sandbox.Lifecycle{Idle: sandbox.Idle{Pause: 10 * time.Minute, Destroy: 24 * time.Hour}}}
	// The ensure manager stamps records with the real time; the reaper's
	// clock starts a minute later and is moved by hand.
	t0 := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	now := t0
	var clock sync.Mutex
	r, err := run.New(st, []*sandbox.Definition{def}, []harness.Harness{command.Harness{}}, run.Options{
		LeaseTTL: time.Hour, // the live run's driver "holds" it: not orphaned within the test
		Now: func() time.Time {
			clock.Lock()
			defer clock.Unlock()
			return now
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	set := func(d time.Duration) {
		clock.Lock()
		now = t0.Add(d)
		clock.Unlock()
	}

	ids := map[string]string{}
	for _, thread := range []string{"approval", "idle", "hookfails", "live"} {
		res, err := r.Ensure().Ensure(ctx, def, ensure.Request{Thread: thread, Run: thread + "-r1"})
		if err != nil {
			t.Fatal(err)
		}
		ids[thread] = res.Handle.ID()
		rec := store.Run{ID: thread + "-r1", ThreadID: thread, DefinitionID: "d", Harness: "command", Status: store.RunCompleted, CreatedAt: t0.Add(-time.Minute), FinishedAt: t0}
		if thread == "live" {
			rec.Status, rec.FinishedAt, rec.DetachedSince = store.RunRunning, time.Time{}, t0
		}
		if err := st.CreateRun(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	appendEvents(t, st, "approval-r1",
		event.CustomEvent(event.ApprovalRequested, event.Approval{ID: "ap-1", Kind: "command", Target: "rm -rf build"}),
		event.CustomEvent(event.ApprovalRequested, event.Approval{ID: "ap-2", Kind: "command", Target: "ls"}),
		event.CustomEvent(event.ApprovalAnswered, event.ApprovalAnswer{ApprovalID: "ap-2", Allowed: true, By: "answer"}),
	)
	// A settled request does not hold the idle thread's sandbox.
	appendEvents(t, st, "idle-r1",
		event.CustomEvent(event.ApprovalRequested, event.Approval{ID: "ap-3", Kind: "command", Target: "ls"}),
		event.CustomEvent(event.ApprovalAnswered, event.ApprovalAnswer{ApprovalID: "ap-3", By: "deadline"}),
	)

	var hooked []string
	opts := run.ReapOptions{MaxRuns: 100, BeforeDestroy: func(ctx context.Context, inst store.Instance, h sandbox.Handle) error {
		hooked = append(hooked, inst.ThreadID)
		if p.isPaused(h.ID()) {
			t.Errorf("the hook got %s paused", inst.ThreadID)
		}
		if inst.ThreadID == "hookfails" {
			return errors.New("checkpoint failed")
		}
		return nil
	}}
	alive := func(thread string) bool {
		_, err := os.Stat(ids[thread])
		return err == nil
	}
	steps := []struct {
		at                       time.Duration
		paused, destroyed, hookF int
		wantPaused               []string
		wantGone                 []string
	}{
		{9 * time.Minute, 0, 0, 0, nil, nil},
		{10 * time.Minute, 2, 0, 0, []string{"idle", "hookfails"}, nil},
		{2 * time.Hour, 0, 0, 0, []string{"idle", "hookfails"}, nil},
		{24 * time.Hour, 0, 1, 1, []string{"hookfails"}, []string{"idle"}},
		{30 * 24 * time.Hour, 0, 0, 1, []string{"hookfails"}, []string{"idle"}},
	}
	for _, s := range steps {
		set(s.at)
		rep, err := r.Reap(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if rep.IdlePaused != s.paused || rep.Idle != s.destroyed || rep.IdleHookFailed != s.hookF || rep.IdleFailed != 0 {
			t.Fatalf("at %s: paused %d destroyed %d hook failed %d failed %d; want %d %d %d 0", s.at, rep.IdlePaused, rep.Idle, rep.IdleHookFailed, rep.IdleFailed, s.paused, s.destroyed, s.hookF)
		}
		for _, thread := range []string{"approval", "idle", "hookfails", "live"} {
			wantPaused := contains(s.wantPaused, thread)
			wantGone := contains(s.wantGone, thread)
			if alive(thread) == wantGone {
				t.Fatalf("at %s: %s alive %v", s.at, thread, alive(thread))
			}
			if !wantGone && p.isPaused(ids[thread]) != wantPaused {
				t.Fatalf("at %s: %s paused %v", s.at, thread, p.isPaused(ids[thread]))
			}
		}
		t.Logf("at %s: %+v", s.at, rep)
	}
	if strings.Join(hooked, ",") != "idle,hookfails,hookfails" && strings.Join(hooked, ",") != "hookfails,idle,hookfails" {
		t.Errorf("hook calls %v", hooked)
	}
	rec, ok, _ := st.GetInstance(ctx, def.KeyFor("idle", "", ""))
	if !ok || rec.ProviderSandboxID != "" {
		t.Errorf("the destroyed sandbox's record: %+v %v", rec, ok)
	}
	// The next run answers the approval: from then on the approval thread
	// is idle from that run's end.
	next := store.Run{ID: "approval-r2", ThreadID: "approval", DefinitionID: "d", Harness: "command", Status: store.RunCompleted, CreatedAt: t0.Add(30 * 24 * time.Hour), FinishedAt: t0.Add(30 * 24 * time.Hour)}
	if err := st.CreateRun(ctx, next); err != nil {
		t.Fatal(err)
	}
	set(30*24*time.Hour + 24*time.Hour)
	rep, err := r.Reap(ctx, run.ReapOptions{MaxRuns: 100})
	if err != nil || rep.Idle != 2 || alive("approval") || !alive("live") {
		t.Fatalf("after the answer: %+v, %v; approval alive %v, live alive %v", rep, err, alive("approval"), alive("live"))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func appendEvents(t *testing.T, st store.Store, runID string, evs ...event.Event) {
	t.Helper()
	ctx := context.Background()
	last, err := st.LastSeq(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	var batch []store.NewEvent
	for _, e := range evs {
		batch = append(batch, store.NewEvent{Type: string(e.Type), Data: e.Marshal()})
	}
	if err := st.AppendEvents(ctx, runID, 0, last+1, batch); err != nil {
		t.Fatal(err)
	}
}
