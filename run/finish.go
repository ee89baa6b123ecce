package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store"
)

// finish closes the run once its journal ended.
func (d *driver) finish(res readResult, cancelled bool) error {
	if !cancelled {
		if c, err := d.cancelRequested(); err == nil && c {
			cancelled = true
		}
	}
	switch {
	case res.err == nil:
		evs := d.tr.End(res.exit.Code)
		d.missingAgent(evs, res.exit.Code)
		if cancelled {
			evs = append(withoutTerminal(evs), cancelEvent(d.run, &res.exit.Code))
		}
		d.emitFinal(evs)
		status, msg := store.RunCompleted, ""
		switch {
		case cancelled:
			status = store.RunCancelled
		case res.exit.Code != 0:
			status, msg = store.RunFailed, d.exitMessage(res.exit.Code)
		case len(evs) > 0 && evs[len(evs)-1].Type == event.RunError:
			// The agent exited 0 but its own stream ended in an error (a
			// refusal, an is_error result).
			status, msg = store.RunFailed, d.secrets().Redact(evs[len(evs)-1].Message)
		}
		return d.finalize(status, &res.exit.Code, msg)
	case cancelled:
		d.emitFinal([]event.Event{cancelEvent(d.run, nil)})
		return d.finalize(store.RunCancelled, nil, "")
	case d.ctx.Err() != nil:
		return res.err
	case d.start == nil && errors.Is(res.err, journal.ErrStalled):
		return d.fail(fmt.Errorf("the process that started the run went away before its agent started: %w", res.err), "lost-before-start")
	default:
		return d.fail(res.err, "journal")
	}
}

// fail ends the run with a RUN_ERROR for err (or cancelled, when a cancel
// was requested meanwhile).
func (d *driver) fail(err error, code string) error {
	if d.ctx.Err() != nil {
		return err
	}
	if c, cerr := d.cancelRequested(); cerr == nil && c {
		d.emitFinal([]event.Event{cancelEvent(d.run, nil)})
		return d.finalize(store.RunCancelled, nil, "")
	}
	msg := d.secrets().Redact(err.Error())
	d.emitFinal([]event.Event{{Type: event.RunError, ThreadID: d.run.ThreadID, RunID: d.run.ID, Message: msg, Code: code}})
	return d.finalize(store.RunFailed, nil, msg)
}

// failDiverged ends a run whose replay contradicts its stored log: the
// agent is stopped (its output can no longer be delivered faithfully), a
// RUN_ERROR of code "replay-diverged" naming the event goes after the
// stored events, and the run is failed with its log closed, so attach,
// cancel and the reaper see a finished run instead of retrying for ever.
func (d *driver) failDiverged(err error) error {
	d.r.log.Error("run: the journal's replay diverged; failing the run", "run", d.run.ID, "err", err)
	if d.handle != nil && d.handle.Capabilities().KillableProcesses {
		if paths, perr := journal.PathsFor(d.r.opts.JournalDir, d.run.ID); perr == nil {
			ctx, cancel := context.WithTimeout(d.ctx, time.Minute)
			if kerr := journal.Kill(ctx, d.handle, paths, d.r.opts.KillGrace); kerr != nil {
				d.r.log.Warn("run: stopping the agent of a diverged run failed", "run", d.run.ID, "err", kerr)
			}
			cancel()
		}
	}
	msg := d.secrets().Redact(err.Error())
	d.emitFinal([]event.Event{{Type: event.RunError, ThreadID: d.run.ThreadID, RunID: d.run.ID, Message: msg, Code: "replay-diverged"}})
	return d.finalize(store.RunFailed, nil, msg)
}

// finishStored finalizes a taken-over run whose stored log already ends
// with its terminal event (its driver died between appending it and
// writing the status): the outcome is the one recorded, nothing is
// replayed. It reports whether it did.
func (d *driver) finishStored() (bool, error) {
	if d.stored == 0 || d.start != nil {
		return false, nil
	}
	last, err := d.storedEvent(d.stored)
	if err != nil {
		return false, err
	}
	if !last.Terminal() {
		return false, nil
	}
	status, msg := store.RunCompleted, ""
	switch {
	case last.Cancelled():
		status = store.RunCancelled
	case last.Type == event.RunError:
		status, msg = store.RunFailed, last.Message
	}
	if res, ok, err := d.r.ensure.EnsureExisting(d.ctx, d.def, ensure.Request{Thread: d.run.ThreadID, Run: d.run.ID, Tenant: d.run.Tenant}); err == nil && ok {
		d.handle = res.Handle // for the after-run work
	}
	d.replayOver = true
	return true, d.finalize(status, last.ExitCode, msg)
}

// missingAgent rewrites the closing RUN_ERROR of an agent that could not
// be started (exit 127 from a harness with an install hint) to say which
// CLI is missing and how to install it, with code "agent-missing", so the
// event stream says what the run record says. It depends only on the exit
// code and the harness, so a replay derives the same event.
func (d *driver) missingAgent(evs []event.Event, code int) {
	in, ok := d.h.(harness.Installer)
	if !ok || code != 127 || len(evs) == 0 || evs[len(evs)-1].Type != event.RunError {
		return
	}
	last := &evs[len(evs)-1]
	last.Message, last.Code = in.InstallHint()+" (exit 127)", "agent-missing"
}

// exitMessage describes a failed agent exit for the run record, with the
// tail of its stderr (secrets redacted).
func (d *driver) exitMessage(code int) string {
	msg := fmt.Sprintf("the agent exited with code %d", code)
	if in, ok := d.h.(harness.Installer); ok && code == 127 {
		msg = fmt.Sprintf("%s (exit 127)", in.InstallHint())
	}
	paths, err := journal.PathsFor(d.r.opts.JournalDir, d.run.ID)
	if err != nil {
		return msg
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), 30*time.Second)
	defer cancel()
	if tail, err := journal.ErrTail(ctx, d.handle, paths, 1000); err == nil && strings.TrimSpace(tail) != "" {
		msg += ": " + strings.TrimSpace(d.secrets().Redact(string(d.scrub.line([]byte(tail)))))
	}
	return msg
}

func (d *driver) secrets() sandbox.Secrets { return d.def.Workspace.SecretsOrEmpty() }

// cancelEvent ends a cancelled run: RUN_FINISHED with AG-UI 1.0's
// cancelled outcome (the run was stopped, it did not fail), the agent's
// exit code in metadata when it has one.
func cancelEvent(run store.Run, code *int) event.Event {
	return event.Event{Type: event.RunFinished, ThreadID: run.ThreadID, RunID: run.ID, Outcome: &event.Outcome{Type: event.OutcomeCancelled}, ExitCode: code}
}

func withoutTerminal(evs []event.Event) []event.Event {
	out := evs[:0:0]
	for _, e := range evs {
		if !e.Terminal() {
			out = append(out, e)
		}
	}
	return out
}

// finalize appends what is pending, writes the terminal status (fenced by
// the epoch), closes the log, and does the post-run lifecycle work.
func (d *driver) finalize(status store.RunStatus, exitCode *int, msg string) error {
	ctx := context.WithoutCancel(d.ctx)
	if err := d.flush(ctx); err != nil {
		return err
	}
	epoch := d.run.DriverEpoch
	p := store.RunPatch{Status: store.Set(status), FinishedAt: store.Set(d.r.opts.Now()), DetachedSince: store.Clear[time.Time](), IfEpoch: &epoch, IfNotTerminal: true}
	if exitCode != nil {
		p.ExitCode = store.Set(*exitCode)
	}
	if msg != "" {
		p.Error = store.Set(msg)
	}
	if _, err := d.r.store.UpdateRun(ctx, d.run.ID, p); err != nil {
		return err
	}
	if err := d.r.store.CloseLog(ctx, d.run.ID, epoch); err != nil {
		return err
	}
	d.mu.Lock()
	d.tailClosed = true
	d.mu.Unlock()
	d.broadcast()
	d.afterRun(ctx, status)
	return nil
}

// afterRun does the lifecycle work of a finished run: remove its journal,
// snapshot after the run, destroy on completion.
func (d *driver) afterRun(ctx context.Context, status store.RunStatus) {
	if d.handle == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if paths, err := journal.PathsFor(d.r.opts.JournalDir, d.run.ID); err == nil {
		if err := journal.Remove(ctx, d.handle, paths); err != nil {
			d.r.log.Debug("run: removing the journal failed; the sweep will", "run", d.run.ID, "err", err)
		}
	}
	for _, p := range d.cleanup {
		if err := d.handle.FS().RemoveAll(ctx, p); err != nil {
			d.r.log.Warn("run: removing a harness file failed", "run", d.run.ID, "path", p, "err", err)
		}
	}
	if len(d.remove) > 0 && !d.removeOnHost() {
		res, err := d.handle.Exec(ctx, sandbox.Command{Args: append([]string{"rm", "-rf", "--"}, d.remove...)})
		if err == nil && res.ExitCode != 0 {
			err = fmt.Errorf("rm exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
		}
		if err != nil {
			d.r.log.Warn("run: removing the agent's per-run state failed", "run", d.run.ID, "paths", d.remove, "err", err)
		}
	}
	req := ensure.Request{Thread: d.run.ThreadID, Run: d.run.ID, Tenant: d.run.Tenant}
	lc := d.def.Lifecycle
	if lc.Checkpoint == sandbox.CheckpointAfterRun && (status == store.RunCompleted || status == store.RunFailed) {
		if _, err := d.r.capture(ctx, d.def, d.handle, SaveCheckpoint{Tenant: d.run.Tenant, Thread: d.run.ThreadID,
			Reason: store.CheckpointAutomatic, SourceRun: d.run.ID}, d.run.Retention); err != nil {
			d.r.log.Warn("run: the checkpoint after the run failed; the sandbox is kept or destroyed as its lifecycle says", "run", d.run.ID, "err", err)
		}
	}
	// A cancelled run keeps its sandbox where the agent could be killed:
	// the thread's work is in it. (Where it could not, the cancel already
	// destroyed it.)
	if (lc.DestroyOnComplete && (status == store.RunCompleted || status == store.RunFailed)) || lc.Reuse == sandbox.ReuseNone {
		if err := d.r.ensure.Destroy(ctx, d.def, req); err != nil {
			d.r.log.Warn("run: destroying the sandbox after the run failed", "run", d.run.ID, "err", err)
		}
		return
	}
	// The snapshot and its record are ensure's: it takes them under the
	// key's lock, like every other write of the instance record.
	if _, _, err := d.r.ensure.SnapshotAfterRun(ctx, d.def, req, d.handle); err != nil {
		d.r.log.Warn("run: snapshot after the run failed", "run", d.run.ID, "err", err)
	}
}

// removeOnHost removes the agent's per-run state with os calls where the
// sandbox's files are the host's (sandbox.HostPather): no rm process. It
// reports false, having removed nothing, when a path has no host path.
func (d *driver) removeOnHost() bool {
	host := make([]string, 0, len(d.remove))
	for _, p := range d.remove {
		hp, ok := sandbox.HostPath(d.handle, p)
		if !ok {
			return false
		}
		host = append(host, hp)
	}
	for _, p := range host {
		// RemoveAll removes a link itself, never what it names.
		if err := os.RemoveAll(p); err != nil {
			d.r.log.Warn("run: removing the agent's per-run state failed", "run", d.run.ID, "path", p, "err", err)
		}
	}
	return true
}
