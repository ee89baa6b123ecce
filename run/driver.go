package run

import (
	"context"
	"errors"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/bootstrap"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store"
)

// driver drives one run in this process: it holds the run's lease and its
// driver epoch, and it alone appends to the run's event log.
type driver struct {
	r     *Runner
	run   store.Run // as claimed: DriverEpoch is ours
	def   *sandbox.Definition
	h     harness.Harness
	lease store.Lease
	start *StartRequest // set for a fresh run, nil for a takeover

	ctx     context.Context // the driver's own; no caller's context reaches it
	cancel  context.CancelFunc
	done    chan struct{}
	started chan struct{} // closed once the agent runs (or driving stopped)
	startMu sync.Once

	cancelAsk  chan struct{} // closed by askCancel: a cancel was stored for the run
	cancelOnce sync.Once

	mu        sync.Mutex
	detaching bool
	notify    chan struct{}     // closed and replaced after every append
	egress    chan event.Egress // attempts the egress gateway reported (NoteEgress)
	lastSeq   int64             // the log's last sequence number
	err       error             // why driving stopped early, if it did

	handle  sandbox.Handle
	exited  <-chan struct{} // closed once the wrapper this driver started exited; nil for a takeover
	cleanup []string        // workspace paths to remove after the run
	remove  []string        // absolute sandbox paths to remove after the run
	tr      harness.Translator
	scrub   *scrubber // the run's secret values; nil when it has none
	agui    aguiState // what the events left open, the approvals asked
	sinkState
	tailState
}

func (r *Runner) newDriver(run store.Run, def *sandbox.Definition, h harness.Harness, lease store.Lease) *driver {
	ctx, cancel := context.WithCancel(context.Background())
	d := &driver{
		r: r, run: run, def: def, h: h, lease: lease, ctx: ctx, cancel: cancel,
		done: make(chan struct{}), notify: make(chan struct{}), started: make(chan struct{}), cancelAsk: make(chan struct{}), egress: make(chan event.Egress, 256),
		tr: withPolicyNotice(run, h.Translator(harness.Run{RunID: run.ID, ThreadID: run.ThreadID})),
	}
	if !run.CancelRequested.IsZero() {
		d.askCancel() // claimed after the cancel was stored: act on it at once
	}
	d.scrub = newScrubber(d.scrubSecrets())
	d.limit = r.opts.MaxEventBytes
	return d
}

// errDetached stops a driver that was asked to detach.
var errDetached = errors.New("run: detached")

// errDiverged means the journal's replay does not match the stored log: a
// bug (a non-deterministic translator), or a journal or log changed behind
// corral's back. It is never papered over: the run ends failed, with a
// RUN_ERROR of code "replay-diverged" after the stored events.
var errDiverged = errors.New("the journal's replay diverged from the stored event log")

func (d *driver) drive() {
	defer close(d.done)
	defer d.markStarted()
	defer func() {
		d.cancel() // first, so the lease watcher does not read the release as a loss
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.currentLease().Release(ctx)
	}()
	go d.keepLease()
	err := d.body()
	if errors.Is(err, errDiverged) && !d.isDetaching() && d.ctx.Err() == nil {
		err = d.failDiverged(err)
	}
	switch {
	case err == nil:
	case d.isDetaching():
		d.finishDetach()
	case d.ctx.Err() != nil:
		// The lease was lost: the successor drives; write nothing.
	default:
		d.setErr(err)
		d.r.log.Error("run: driving failed", "run", d.run.ID, "err", err)
	}
}

func (d *driver) body() error {
	// A fresh run's log is empty: Start created it a moment ago and no
	// other process can append (the claim's epoch fences them out).
	var last int64
	if d.start == nil {
		var err error
		if last, err = d.r.store.LastSeq(d.ctx, d.run.ID); err != nil {
			return err
		}
	}
	d.mu.Lock()
	d.stored, d.lastSeq, d.vseq = last, last, 1
	if d.start == nil {
		d.startTail(last) // a fresh run's was set by Start
	}
	d.mu.Unlock()
	if done, err := d.finishStored(); done || err != nil {
		return err
	}
	if err := d.emit(d.tr.Begin()); err != nil {
		return err
	}
	if err := d.flush(d.ctx); err != nil {
		return err
	}
	// The opening events are not the agent's output: its first line is
	// appended as soon as it is read (flushDue's leading edge counts from
	// here), not a flush interval after RUN_STARTED.
	d.lastFlush = time.Time{}
	if d.start != nil {
		if err := d.startAgent(); err != nil {
			return d.fail(err, "start")
		}
	} else {
		res, ok, err := d.r.ensure.EnsureExisting(d.ctx, d.def, ensure.Request{Thread: d.run.ThreadID, Run: d.run.ID, Tenant: d.run.Tenant})
		if err != nil {
			if d.ctx.Err() != nil {
				return err
			}
			return d.fail(err, "sandbox")
		}
		if !ok {
			return d.fail(sandbox.Errorf(sandbox.NotFound, "run.attach", d.run.ID, "the run's sandbox is gone"), "sandbox-gone")
		}
		d.handle = res.Handle
		d.reattach()
	}
	d.markStarted()
	return d.follow()
}

func (d *driver) markStarted() { d.startMu.Do(func() { close(d.started) }) }

// startAgent ensures the sandbox and starts the journaled agent.
func (d *driver) startAgent() error {
	release, err := d.admitStart()
	if err != nil {
		return err
	}
	defer release()
	m := *d.r.ensure
	if d.r.opts.OnStep != nil {
		m.OnStep = func(ev bootstrap.StepEvent) { d.r.opts.OnStep(d.run.ID, ev) }
	}
	began := time.Now()
	// The provider's preparation steps (an image pull) become events, each
	// appended at once so that a client watching sees the pull live.
	ctx := sandbox.WithProgress(d.ctx, func(s sandbox.ProgressStep) {
		if d.replaying() {
			return // a takeover: the first driver's steps are in the log
		}
		if d.emitOne(event.CustomEvent(event.SandboxProgress, s)) == nil {
			_ = d.flush(d.ctx)
		}
	})
	res, err := m.Ensure(ctx, d.def, ensure.Request{Thread: d.run.ThreadID, Run: d.run.ID, Tenant: d.run.Tenant})
	if f := d.r.opts.OnEnsure; f != nil {
		outcome := string(res.Outcome)
		if err != nil {
			outcome = "failed"
		}
		f(time.Since(began), outcome)
	}
	if err != nil {
		return err
	}
	d.handle = res.Handle
	if cancelled, err := d.cancelRequested(); err == nil && cancelled {
		return errCancelledBeforeStart
	}
	if err := harness.CheckRequirements(d.h, d.handle.Capabilities()); err != nil {
		return err
	}
	paths, err := journal.PathsFor(d.r.opts.JournalDir, d.run.ID)
	if err != nil {
		return err
	}
	var scripts map[string]string
	var mcp []sandbox.MCPServer
	ws := d.def.Workspace
	if ws != nil {
		scripts, mcp = ws.Scripts, ws.MCPServers
	}
	mcp = append(slices.Clip(mcp), d.start.MCPServers...) // the run's own, validated at Start
	// Brokered secrets reach the agent as placeholders only; the gateway
	// swaps them for the values on the way out.
	secrets, env, err := d.runSecrets(d.start.Env)
	if err != nil {
		return err
	}
	if env, err = d.egressEnv(env); err != nil {
		return err
	}
	mcp, secrets = d.withAgentTools(mcp, secrets)
	inv, err := d.h.Prepare(d.ctx, d.handle, harness.Request{
		Run:    harness.Run{RunID: d.run.ID, ThreadID: d.run.ThreadID},
		Prompt: d.start.Prompt, Args: d.start.Args, Env: env,
		Model: d.start.Model, Mode: d.start.Mode, Auth: d.start.Auth, Options: d.start.Options, Approvals: d.start.Approvals,
		AnswerKey: answerKey(d.run),
		Secrets:   secrets, Policy: d.def.Policy, Scripts: scripts,
		Session:    d.previousSession(),
		SkillRoots: ws.SkillRoots(), MCPServers: mcp,
		WorkspaceRoot: d.handle.WorkspaceRoot(), RunDir: paths.Files, Journal: paths.Journal,
	})
	if err != nil {
		return err
	}
	d.cleanup = inv.Cleanup
	for _, p := range inv.RemoveAfter {
		// Absolute and at least two levels deep: never "/", "/home" or a
		// relative path.
		if c := path.Clean(p); path.IsAbs(c) && strings.Count(c, "/") >= 2 {
			d.remove = append(d.remove, c)
		}
	}
	// The driver that starts the agent watches its wrapper: the reader
	// then knows the wrapper's end without looking for it.
	d.exited, err = journal.StartWatch(d.ctx, d.handle, journal.Spec{Paths: paths, Nonce: d.run.JournalNonce, Agent: inv.Command, Stdin: inv.Stdin, Diff: true, DiffGate: inv.DiffGate, KeepBackground: d.def.Lifecycle.KeepBackground})
	return err
}

// reattach lets a harness whose client lives in the driving process
// (harness.Reattacher) take the run's agent over from a process that died.
func (d *driver) reattach() {
	ra, ok := d.h.(harness.Reattacher)
	if !ok {
		return
	}
	paths, err := journal.PathsFor(d.r.opts.JournalDir, d.run.ID)
	if err != nil {
		return
	}
	var scripts map[string]string
	if ws := d.def.Workspace; ws != nil {
		scripts = ws.Scripts
	}
	if err := ra.Reattach(d.ctx, d.handle, harness.Request{
		Run:       harness.Run{RunID: d.run.ID, ThreadID: d.run.ThreadID},
		AnswerKey: answerKey(d.run), Secrets: d.scrubSecrets(), Policy: d.def.Policy, Scripts: scripts,
		WorkspaceRoot: d.handle.WorkspaceRoot(), RunDir: paths.Files, Journal: paths.Journal,
	}); err != nil {
		d.r.log.Warn("run: the harness could not take the run's agent over", "run", d.run.ID, "err", err)
	}
}

var errCancelledBeforeStart = errors.New("run: cancelled before the agent started")

// readJournal reads a run's journal from byte 0; tests replace it to cut
// lines into pieces as a reader with a small MaxLine would.
var readJournal = func(ctx context.Context, rd *journal.Reader, fn func(journal.Line) error) (journal.Exit, error) {
	return rd.Read(ctx, 0, fn)
}

type readResult struct {
	exit journal.Exit
	err  error
}

// follow reads the journal from byte 0, translating and appending, until
// the agent's exit; it acts on cancel requests meanwhile.
func (d *driver) follow() error {
	paths, err := journal.PathsFor(d.r.opts.JournalDir, d.run.ID)
	if err != nil {
		return err
	}
	rd := &journal.Reader{Handle: d.handle, Paths: paths, Nonce: d.run.JournalNonce, Strategy: d.r.opts.Strategy,
		PollInterval: d.r.opts.PollInterval, FirstByteTimeout: d.r.opts.FirstByteTimeout, Exited: d.exited}
	if rd.FirstByteTimeout == 0 && d.start == nil {
		// A taken-over run's journal exists or never will.
		rd.FirstByteTimeout = 10 * time.Second
	}
	lines := make(chan journal.Line, 1024)
	result := make(chan readResult, 1)
	readCtx, stopRead := context.WithCancel(d.ctx)
	defer stopRead()
	go func() {
		exit, err := readJournal(readCtx, rd, func(l journal.Line) error {
			select {
			case lines <- l:
				return nil
			case <-readCtx.Done():
				return readCtx.Err()
			}
		})
		close(lines)
		result <- readResult{exit, err}
	}()
	flushT := time.NewTicker(d.r.opts.FlushInterval)
	defer flushT.Stop()
	cancelT := time.NewTicker(d.r.opts.CancelCheck)
	defer cancelT.Stop()
	cancelled := false
	cancelAsked := d.cancelAsk // a cancel asked in this process: at once, no poll
	cancelPending := false
	feed := newLineFeed(d.tr, d.scrub)
	for {
		// A takeover's replay is verified against the stored log to its
		// end before the cancel kills the agent: a divergence in what is
		// stored still ends the run failed, whatever came after.
		if cancelPending && !cancelled && !d.replaying() {
			cancelled = true
			go d.stopAgent(paths)
		}
		select {
		case l, ok := <-lines:
			if !ok {
				res := <-result
				if res.err == nil {
					// The journal may end inside a long line's pieces.
					d.lineStart = feed.start
					if err := d.emit(feed.end()); err != nil {
						return err
					}
				}
				return d.finish(res, cancelled)
			}
			var evs []event.Event
			if l.Diff != nil {
				diff := *l.Diff
				diff.Patch = d.scrub.line(diff.Patch)
				evs = []event.Event{fileChanged(&diff)}
				feed.skip(l)
				if !d.replaying() { // new, not a replay: tell the hook once
					d.fileHook(&diff)
				}
			} else {
				evs = feed.feed(l)
			}
			d.lineStart = feed.start
			if err := d.emit(evs); err != nil {
				return err
			}
			if d.flushDue(len(lines) == 0) {
				if err := d.flush(d.ctx); err != nil {
					return err
				}
			}
		case <-flushT.C:
			if err := d.flush(d.ctx); err != nil {
				return err
			}
		case e := <-d.egress:
			if d.replaying() {
				continue // a takeover still matching the log: the attempt is logged by the gateway only
			}
			if err := d.emitOne(event.CustomEvent(event.EgressAttempt, e)); err != nil {
				return err
			}
			if err := d.flush(d.ctx); err != nil {
				return err
			}
		case <-cancelAsked:
			cancelAsked = nil // once
			cancelPending = true
		case <-cancelT.C:
			if cancelled {
				continue
			}
			if c, err := d.cancelRequested(); err == nil && c {
				cancelled = true
				go d.stopAgent(paths)
			}
		case <-d.ctx.Done():
			return d.ctx.Err()
		}
	}
}

// interruptedExitWait bounds how long a cancel waits for the journal's exit
// after the harness reported that the agent stopped by itself, before it
// kills the run's processes all the same.
const interruptedExitWait = 30 * time.Second

// stopAgent acts on a cancel: a harness that can ask its agent to stop
// (harness.Interrupter) does so first; if the agent did not stop, kill it
// where processes can be killed (its wrapper then records the exit),
// destroy the sandbox elsewhere.
func (d *driver) stopAgent(paths journal.Paths) {
	// Not d.ctx: the driver ends as soon as the agent dies, and the kill
	// must not be cut short by that.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), time.Minute)
	defer cancel()
	// The agent may end its turn itself first (ACP session/cancel, within
	// the harness's grace): then its journal ends by itself and nothing is
	// killed, unless the exit does not show up in the journal soon after.
	if harness.Interrupt(ctx, d.h, d.run.ID) {
		t := time.NewTimer(interruptedExitWait)
		defer t.Stop()
		select {
		case <-d.ctx.Done():
			return
		case <-t.C:
			d.r.log.Warn("run: the interrupted agent's journal shows no exit; killing it", "run", d.run.ID, "after", interruptedExitWait)
		}
	}
	if d.handle.Capabilities().KillableProcesses {
		if err := journal.Kill(ctx, d.handle, paths, d.r.opts.KillGrace); err == nil {
			return
		} else {
			d.r.log.Warn("run: killing the agent failed; destroying its sandbox", "run", d.run.ID, "err", err)
		}
	}
	if err := d.r.ensure.Destroy(ctx, d.def, ensure.Request{Thread: d.run.ThreadID, Run: d.run.ID, Tenant: d.run.Tenant}); err != nil {
		d.r.log.Error("run: destroying the sandbox of a cancelled run failed", "run", d.run.ID, "err", err)
	}
}

// askCancel tells the driver that a cancel was stored for its run (by
// Runner.Cancel in this process): it acts at once instead of at its next
// poll.
func (d *driver) askCancel() { d.cancelOnce.Do(func() { close(d.cancelAsk) }) }

// cancelRequested reports whether a cancel was asked: in this process
// (askCancel) without a store read, else as the run's record says (a
// cancel asked through another process).
func (d *driver) cancelRequested() (bool, error) {
	select {
	case <-d.cancelAsk:
		return true, nil
	default:
	}
	rec, ok, err := d.r.store.GetRun(d.ctx, d.run.ID)
	if err != nil || !ok {
		return false, err
	}
	return !rec.CancelRequested.IsZero(), nil
}

func (d *driver) stop(err error) {
	d.setErr(err)
	d.cancel()
}

func (d *driver) setErr(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == nil {
		d.err = err
	}
}

func (d *driver) isDetaching() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.detaching
}

// detach asks the driver to stop and waits until it has.
func (d *driver) detach(ctx context.Context) error {
	d.mu.Lock()
	d.detaching = true
	d.mu.Unlock()
	d.cancel()
	select {
	case <-d.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finishDetach appends what was translated and marks the run detached.
func (d *driver) finishDetach() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.flush(ctx); err != nil {
		d.r.log.Warn("run: appending on detach failed", "run", d.run.ID, "err", err)
	}
	epoch := d.run.DriverEpoch
	if _, err := d.r.store.UpdateRun(ctx, d.run.ID, store.RunPatch{DetachedSince: store.Set(d.r.opts.Now()), IfEpoch: &epoch, IfNotTerminal: true}); err != nil &&
		sandbox.CodeOf(err) != sandbox.FailedPrecondition {
		d.r.log.Warn("run: marking the run detached failed", "run", d.run.ID, "err", err)
	}
	d.setErr(errDetached)
	d.broadcast()
}
