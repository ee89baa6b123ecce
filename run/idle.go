package run

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store"
)

// PendingApproval is an approval request a run ended with and did not
// settle during its turn (an approval.requested event with no
// approval.answered for it): the thread's next run answers it
// (StartRequest.Approvals).
type PendingApproval struct {
	RunID       string
	ApprovalID  string
	RequestedAt time.Time
}

// IdleInput is what DecideIdle decides from.
type IdleInput struct {
	// Now is the time of the decision.
	Now time.Time
	// Lifecycle is the sandbox definition's lifecycle (Idle, KeepAlive,
	// Reuse).
	Lifecycle sandbox.Lifecycle
	// Instance is the sandbox's record.
	Instance store.Instance
	// Runs are runs of the instance's thread, in any order; the ones of
	// another tenant or definition, and with reuse none the ones other
	// than the instance's own run, are ignored.
	Runs []store.Run
	// Pending are the unanswered approval requests of the thread's runs.
	// Only those of the last run count: a later run was the answer.
	Pending []PendingApproval
	// Paused says the sandbox is paused now; CanPause that it can be.
	Paused, CanPause bool
}

// IdleDecision is what to do with a sandbox, and why.
type IdleDecision struct {
	Action ensure.IdleAction
	// Reason says why, in a few words (for logs and tests).
	Reason string
	// IdleSince is when idle time started counting (zero when the sandbox
	// is not idle).
	IdleSince time.Time
	// LastRun is the run idle counts from; empty when the thread has no
	// finished run of this sandbox.
	LastRun string
}

// DecideIdle decides what the idle reaper does with one sandbox. It is a
// pure function of its input:
//
//   - no sandbox (its id cleared), or no idle times: keep;
//   - a live run of the thread (running: attached, detached, or orphaned
//     and not yet finalized): keep, the sandbox is not idle at all;
//   - the last run ended with an approval request nobody answered: keep
//     while Idle.ApprovalWait (from the run's end) has not passed, and for
//     good when it is zero; past it, idle counts from the end of the wait;
//   - otherwise idle counts from the end of the last run (FinishedAt, or
//     its last write when a terminal record has none), or from the
//     record's UpdatedAt when the thread has no run of this sandbox;
//   - idle for the destroy time or longer: destroy (paused or not); for the
//     pause time or longer: pause, when the sandbox can pause and is not
//     paused yet; else keep.
func DecideIdle(in IdleInput) IdleDecision {
	pause, destroy := in.Lifecycle.IdleTimes()
	if in.Instance.ProviderSandboxID == "" {
		return IdleDecision{Action: ensure.IdleKeep, Reason: "no sandbox"}
	}
	if pause <= 0 && destroy <= 0 {
		return IdleDecision{Action: ensure.IdleKeep, Reason: "no idle times"}
	}
	var last *store.Run
	var lastEnd time.Time
	for i := range in.Runs {
		r := &in.Runs[i]
		if !usesSandbox(in.Lifecycle, in.Instance, *r) {
			continue
		}
		if !r.Status.Terminal() {
			return IdleDecision{Action: ensure.IdleKeep, Reason: "live run " + r.ID}
		}
		end := r.FinishedAt
		if end.IsZero() {
			end = r.UpdatedAt
		}
		if last == nil || end.After(lastEnd) || end.Equal(lastEnd) && later(*r, *last) {
			last, lastEnd = r, end
		}
	}
	since := in.Instance.UpdatedAt
	reason := "idle since the record's last use"
	if last != nil {
		since, reason = lastEnd, "idle since run "+last.ID+" ended"
		for _, p := range in.Pending {
			if p.RunID != last.ID {
				continue
			}
			wait := in.Lifecycle.Idle.ApprovalWait
			if wait <= 0 || in.Now.Before(lastEnd.Add(wait)) {
				return IdleDecision{Action: ensure.IdleKeep, Reason: "approval " + p.ApprovalID + " of run " + last.ID + " is unanswered", LastRun: last.ID}
			}
			since, reason = lastEnd.Add(wait), "idle since the wait for approval "+p.ApprovalID+" ended"
			break
		}
	}
	idle := in.Now.Sub(since)
	d := IdleDecision{Action: ensure.IdleKeep, Reason: reason, IdleSince: since}
	if last != nil {
		d.LastRun = last.ID
	}
	switch {
	case destroy > 0 && idle >= destroy:
		d.Action = ensure.IdleDestroy
	case pause > 0 && idle >= pause && in.CanPause && !in.Paused:
		d.Action = ensure.IdlePause
	}
	return d
}

// usesSandbox says whether run r ran in the instance's sandbox: a run of
// its thread, tenant and definition, and with reuse none its own run.
func usesSandbox(l sandbox.Lifecycle, inst store.Instance, r store.Run) bool {
	switch {
	case r.ThreadID != inst.ThreadID || r.Tenant != inst.Tenant:
		return false
	case inst.DefinitionID != "" && r.DefinitionID != "" && r.DefinitionID != inst.DefinitionID:
		return false
	case l.Reuse == sandbox.ReuseNone:
		return r.ID == inst.LatestRunID
	}
	return true
}

// later orders runs that ended at the same time: the one created later,
// then the greater id.
func later(a, b store.Run) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.After(b.CreatedAt)
	}
	return a.ID > b.ID
}

// maxIdleEvents bounds the events read to find a run's unanswered
// approvals; a log longer than that is read only this far, and a request
// past it is not seen (the sandbox is then treated as idle).
const maxIdleEvents = 100_000

// pendingApprovals returns the approval requests of run that its turn did
// not settle: approval.requested events with no approval.answered for the
// same id, in the order requested.
func (r *Runner) pendingApprovals(ctx context.Context, runID string) ([]PendingApproval, error) {
	const page = 1000
	var (
		order []string
		open  = map[string]time.Time{}
		after int64
	)
	for after < maxIdleEvents {
		evs, err := r.store.ReadEvents(ctx, runID, after, page)
		if err != nil {
			return nil, err
		}
		for _, ev := range evs {
			after = ev.Seq
			name, id, ok := approvalEvent(ev)
			if !ok {
				continue
			}
			switch name {
			case event.ApprovalRequested:
				if _, seen := open[id]; !seen {
					order = append(order, id)
				}
				open[id] = ev.Time
			case event.ApprovalAnswered:
				delete(open, id)
			}
		}
		if len(evs) < page {
			break
		}
	}
	var out []PendingApproval
	for _, id := range order {
		if at, ok := open[id]; ok {
			out = append(out, PendingApproval{RunID: runID, ApprovalID: id, RequestedAt: at})
		}
	}
	return out, nil
}

// approvalEvent picks approval.requested and approval.answered out of a
// stored event: its name and approval id. Anything else, or a payload that
// does not decode, is not one.
func approvalEvent(ev store.Event) (name, id string, ok bool) {
	if ev.Type != string(event.Custom) || !strings.Contains(string(ev.Data), "approval.") {
		return "", "", false
	}
	e, err := event.Unmarshal(ev.Data)
	if err != nil || (e.Name != event.ApprovalRequested && e.Name != event.ApprovalAnswered) {
		return "", "", false
	}
	var v struct {
		ID string `json:"approvalId"`
	}
	if json.Unmarshal(e.Value, &v) != nil || v.ID == "" {
		return "", "", false
	}
	return e.Name, v.ID, true
}

// decideIdle gathers DecideIdle's input for one instance from the store:
// the thread's runs and, only when the sandbox would otherwise be paused
// or destroyed, the last run's unanswered approvals (an approval can only
// keep a sandbox, so a keep needs no events read).
func (r *Runner) decideIdle(ctx context.Context, def *sandbox.Definition, now time.Time, st ensure.IdleState) (IdleDecision, error) {
	runs, err := r.store.ListRuns(ctx, store.RunFilter{ThreadID: st.Instance.ThreadID, Tenant: st.Instance.Tenant})
	if err != nil {
		return IdleDecision{}, err
	}
	in := IdleInput{Now: now, Lifecycle: def.Lifecycle, Instance: st.Instance, Runs: runs, Paused: st.Paused, CanPause: st.CanPause}
	d := DecideIdle(in)
	if d.Action == ensure.IdleKeep || d.LastRun == "" {
		return d, nil
	}
	if in.Pending, err = r.pendingApprovals(ctx, d.LastRun); err != nil {
		return IdleDecision{}, err
	}
	if len(in.Pending) == 0 {
		return d, nil
	}
	return DecideIdle(in), nil
}
