package run

import (
	"context"
	"fmt"
	"time"

	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store"
)

// ReapOptions tune a reaper pass.
type ReapOptions struct {
	// TTL expires runs that nobody watched for longer than this: they are
	// cancelled. Zero never expires a run.
	TTL time.Duration
	// MaxRuns bounds the runs one pass looks at. Default 25.
	MaxRuns int
	// Budget bounds the time spent finalizing one run. Default 30s.
	Budget time.Duration
	// BeforeDestroy, when set, is called with an idle sandbox before the
	// pass destroys it (Lifecycle.Idle.Destroy, KeepAlive). By default the
	// pass captures a checkpoint of the thread (reason before-destroy) so
	// the thread comes back from it. An error keeps the sandbox (counted in
	// IdleHookFailed).
	BeforeDestroy func(ctx context.Context, inst store.Instance, h sandbox.Handle) error
}

// Reap outcomes, per run.
const (
	ReapFinalized = "finalized" // its agent had exited; the run was driven to its end
	ReapExpired   = "expired"   // detached longer than the TTL; cancelled
	ReapProducing = "producing" // still running, not expired; left alone
	ReapStarting  = "starting"  // its agent has not started yet; left alone
	ReapBusy      = "busy"      // a live process drives it
	ReapFailed    = "failed"    // something went wrong; see Error
)

// ReapReport is what a pass did.
type ReapReport struct {
	Skipped bool        `json:"skipped,omitempty"` // another process is reaping
	Runs    []ReapedRun `json:"runs"`
	// Idle counts sandboxes destroyed for being idle (Lifecycle.Idle.Destroy
	// or KeepAlive), IdlePaused those paused (Lifecycle.Idle.Pause).
	Idle       int `json:"idleSandboxes"`
	IdlePaused int `json:"idlePaused"`
	// IdleHookFailed counts idle sandboxes kept because BeforeDestroy
	// failed; IdleFailed those whose decision, pause or destroy failed.
	IdleHookFailed int `json:"idleHookFailed,omitempty"`
	IdleFailed     int `json:"idleFailed,omitempty"`
	// Journals counts journals of finished runs deleted from long-lived
	// sandboxes (each pass sweeps a few sandboxes, in turn).
	Journals int `json:"journalsDeleted"`
}

// ReapedRun is one run's outcome.
type ReapedRun struct {
	RunID    string          `json:"runId"`
	Outcome  string          `json:"outcome"`
	Status   store.RunStatus `json:"status,omitempty"`
	ExitCode *int            `json:"exitCode,omitempty"`
	Error    string          `json:"error,omitempty"`
}

// Count returns how many runs had the outcome.
func (rep ReapReport) Count(outcome string) int {
	n := 0
	for _, r := range rep.Runs {
		if r.Outcome == outcome {
			n++
		}
	}
	return n
}

// Reap runs one reaper pass: it finalizes runs nobody drives whose agent
// has exited, cancels runs nobody watched for longer than the TTL, leaves
// runs that are still starting or producing alone, and pauses and destroys
// sandboxes idle longer than their definition's idle times (DecideIdle:
// idle counts from the end of the thread's last run; a live run or an
// unanswered approval keeps the sandbox). One pass at a time runs
// across every process sharing the store; a failure on one run never stops
// the pass, and each pass does bounded work.
func (r *Runner) Reap(ctx context.Context, opts ReapOptions) (rep ReapReport, err error) {
	if opts.MaxRuns <= 0 {
		opts.MaxRuns = 25
	}
	if opts.Budget <= 0 {
		opts.Budget = 30 * time.Second
	}
	lease, ok, err := r.store.TryLock(ctx, "corral-reaper", time.Minute)
	if err != nil {
		return rep, err
	}
	if !ok {
		return ReapReport{Skipped: true}, nil
	}
	defer func() { _ = lease.Release(context.WithoutCancel(ctx)) }()

	now := r.opts.Now()
	cands, err := r.reapCandidates(ctx, now, opts.MaxRuns)
	if err != nil {
		return rep, err
	}
	for _, run := range cands {
		rep.Runs = append(rep.Runs, r.reapOne(ctx, run, now, opts))
	}
	for _, def := range r.defs {
		irep, err := r.ensure.ReapIdle(ctx, def, ensure.IdleOptions{
			Limit:         opts.MaxRuns,
			Now:           now,
			BeforeDestroy: r.beforeDestroy(def, opts.BeforeDestroy),
			Decide: func(ctx context.Context, st ensure.IdleState) (ensure.IdleAction, error) {
				d, err := r.decideIdle(ctx, def, now, st)
				if err != nil {
					return ensure.IdleKeep, err
				}
				if d.Action != ensure.IdleKeep {
					r.log.Info("run: idle sandbox", "action", d.Action, "key", st.Instance.Key, "why", d.Reason, "since", d.IdleSince)
				}
				return d.Action, nil
			},
		})
		if err != nil {
			r.log.Warn("run: idle reaping failed", "definition", def.ID, "err", err)
		}
		rep.Idle += irep.Destroyed
		rep.IdlePaused += irep.Paused
		rep.IdleHookFailed += irep.HookFailed
		rep.IdleFailed += irep.Failed
	}
	rep.Journals = r.sweepJournals(ctx, 5)
	return rep, nil
}

// sweepJournals deletes the journals of finished runs in up to n
// sandboxes, taking the instances in turn across passes. A journal is
// deleted only when its run's record is terminal, never on doubt.
func (r *Runner) sweepJournals(ctx context.Context, n int) int {
	insts, err := r.store.ListInstances(ctx, store.InstanceFilter{})
	if err != nil || len(insts) == 0 {
		return 0
	}
	r.mu.Lock()
	start := r.sweepCursor % len(insts)
	r.sweepCursor = start + n
	r.mu.Unlock()
	deleted := 0
	for i := 0; i < n && i < len(insts); i++ {
		inst := insts[(start+i)%len(insts)]
		def, ok := r.defs[inst.DefinitionID]
		if !ok || inst.ProviderSandboxID == "" || def.Provider.Name() != inst.Provider {
			continue
		}
		// Resume would start a paused sandbox again: leave it paused.
		var pr sandbox.PauseReporter
		if sandbox.ProviderAs(def.Provider, &pr) {
			if paused, err := pr.Paused(ctx, inst.ProviderSandboxID); err != nil || paused {
				continue
			}
		}
		h, err := def.Provider.Resume(ctx, inst.ProviderSandboxID)
		if err != nil {
			continue
		}
		res, err := journal.Sweep(ctx, h, r.opts.JournalDir, 50, func(ctx context.Context, runID string) (bool, error) {
			rec, ok, err := r.store.GetRun(ctx, runID)
			if err != nil {
				return false, err
			}
			return ok && rec.Status.Terminal(), nil
		})
		if err != nil {
			r.log.Debug("run: sweeping journals failed", "sandbox", inst.ProviderSandboxID, "err", err)
			continue
		}
		deleted += len(res.Deleted)
	}
	return deleted
}

// reapCandidates lists detached runs, and running runs whose driver died
// without detaching (no live lease); the latter get DetachedSince now, so
// the TTL counts from the first pass that saw them orphaned.
func (r *Runner) reapCandidates(ctx context.Context, now time.Time, limit int) ([]store.Run, error) {
	detached, err := r.store.ListReclaimable(ctx, now, limit)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, d := range detached {
		seen[d.ID] = true
	}
	running, err := r.store.ListRuns(ctx, store.RunFilter{Statuses: []store.RunStatus{store.RunRunning}, UpdatedBefore: now.Add(-r.opts.LeaseTTL), Limit: limit})
	if err != nil {
		return nil, err
	}
	for _, run := range running {
		if seen[run.ID] || len(detached) >= limit || r.driving(run.ID) != nil {
			continue
		}
		lease, ok, err := r.store.TryLock(ctx, leaseName(run.ID), r.opts.LeaseTTL)
		if err != nil || !ok {
			continue
		}
		epoch := run.DriverEpoch
		upd, err := r.store.UpdateRun(ctx, run.ID, store.RunPatch{DetachedSince: store.Set(now), IfEpoch: &epoch, IfNotTerminal: true})
		_ = lease.Release(context.WithoutCancel(ctx))
		if err == nil {
			detached = append(detached, upd)
		}
	}
	return detached, nil
}

func (r *Runner) reapOne(ctx context.Context, run store.Run, now time.Time, opts ReapOptions) (out ReapedRun) {
	out = ReapedRun{RunID: run.ID}
	defer func() {
		if p := recover(); p != nil {
			out.Outcome, out.Error = ReapFailed, fmt.Sprint("panic: ", p)
			r.log.Error("run: reaper panicked on a run", "run", run.ID, "panic", p)
		}
	}()
	fail := func(err error) ReapedRun {
		out.Outcome, out.Error = ReapFailed, err.Error()
		r.log.Warn("run: reaping a run failed", "run", run.ID, "err", err)
		return out
	}
	expired := opts.TTL > 0 && !run.DetachedSince.IsZero() && !run.DetachedSince.After(now.Add(-opts.TTL))
	if r.driving(run.ID) != nil {
		out.Outcome = ReapBusy
		return out
	}
	if !expired {
		finished, started, err := r.probe(ctx, run)
		switch {
		case err != nil:
			return fail(err)
		case !started:
			out.Outcome = ReapStarting
			return out
		case !finished:
			out.Outcome = ReapProducing
			return out
		}
		out.Outcome = ReapFinalized
	} else {
		if _, err := r.store.UpdateRun(ctx, run.ID, store.RunPatch{CancelRequested: store.Set(now), IfNotTerminal: true}); err != nil && sandbox.CodeOf(err) != sandbox.FailedPrecondition {
			return fail(err)
		}
		out.Outcome = ReapExpired
	}
	if err := r.TakeOver(ctx, run.ID); err != nil {
		return fail(err)
	}
	bctx, cancel := context.WithTimeout(ctx, opts.Budget)
	defer cancel()
	if err := r.Wait(bctx, run.ID); err != nil {
		return fail(fmt.Errorf("not finished within the budget of %s", opts.Budget))
	}
	final, _, err := r.store.GetRun(ctx, run.ID)
	if err != nil {
		return fail(err)
	}
	out.Status, out.ExitCode = final.Status, final.ExitCode
	if !final.Status.Terminal() {
		out.Outcome = ReapBusy // someone else claimed it meanwhile
	}
	return out
}

// probe looks at the run's journal without driving it.
func (r *Runner) probe(ctx context.Context, run store.Run) (finished, started bool, err error) {
	def, ok := r.defs[run.DefinitionID]
	if !ok {
		return false, false, sandbox.Errorf(sandbox.FailedPrecondition, "run.reap", run.ID, "unknown definition %q", run.DefinitionID)
	}
	res, ok, err := r.ensure.EnsureExisting(ctx, def, ensure.Request{Thread: run.ThreadID, Run: run.ID, Tenant: run.Tenant})
	if err != nil {
		return false, false, err
	}
	if !ok {
		// The sandbox is gone: nothing will ever come. Driving the run
		// ends it (as failed: its sandbox is gone).
		return true, true, nil
	}
	paths, err := journal.PathsFor(r.opts.JournalDir, run.ID)
	if err != nil {
		return false, false, err
	}
	st, err := journal.Probe(ctx, res.Handle, paths, run.JournalNonce)
	if err != nil {
		return false, false, err
	}
	if st.Finished || (st.Started && !st.Alive) {
		return true, true, nil
	}
	return false, st.Started, nil
}
