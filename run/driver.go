package run

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
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

	mu        sync.Mutex
	detaching bool
	notify    chan struct{} // closed and replaced after every append
	lastSeq   int64         // the log's last sequence number
	err       error         // why driving stopped early, if it did

	handle   sandbox.Handle
	cleanup  []string // workspace paths to remove after the run
	remove   []string // absolute sandbox paths to remove after the run
	tr       harness.Translator
	stored   int64 // events in the log when the claim was made
	produced int64 // events the translator has produced
	verify   []store.Event
	pending  []store.NewEvent
}

func (r *Runner) newDriver(run store.Run, def *sandbox.Definition, h harness.Harness, lease store.Lease) *driver {
	ctx, cancel := context.WithCancel(context.Background())
	return &driver{
		r: r, run: run, def: def, h: h, lease: lease, ctx: ctx, cancel: cancel,
		done: make(chan struct{}), notify: make(chan struct{}), started: make(chan struct{}),
		tr: withPolicyNotice(run, h.Translator(harness.Run{RunID: run.ID, ThreadID: run.ThreadID})),
	}
}

// errDetached stops a driver that was asked to detach.
var errDetached = errors.New("run: detached")

// errDiverged means the journal's replay does not match the stored log: a
// bug (a non-deterministic translator), never papered over.
var errDiverged = errors.New("run: the journal's replay diverged from the stored event log")

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
	switch {
	case err == nil:
	case d.isDetaching():
		d.finishDetach()
	case d.ctx.Err() != nil && !errors.Is(err, errDiverged):
		// The lease was lost: the successor drives; write nothing.
	default:
		d.setErr(err)
		d.r.log.Error("run: driving failed", "run", d.run.ID, "err", err)
	}
}

func (d *driver) body() error {
	last, err := d.r.store.LastSeq(d.ctx, d.run.ID)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.stored, d.lastSeq = last, last
	d.mu.Unlock()
	if err := d.emit(d.tr.Begin()); err != nil {
		return err
	}
	if err := d.flush(d.ctx); err != nil {
		return err
	}
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
	}
	d.markStarted()
	return d.follow()
}

func (d *driver) markStarted() { d.startMu.Do(func() { close(d.started) }) }

// startAgent ensures the sandbox and starts the journaled agent.
func (d *driver) startAgent() error {
	m := *d.r.ensure
	if d.r.opts.OnStep != nil {
		m.OnStep = func(ev bootstrap.StepEvent) { d.r.opts.OnStep(d.run.ID, ev) }
	}
	began := time.Now()
	res, err := m.Ensure(d.ctx, d.def, ensure.Request{Thread: d.run.ThreadID, Run: d.run.ID, Tenant: d.run.Tenant})
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
	inv, err := d.h.Prepare(d.ctx, d.handle, harness.Request{
		Run:    harness.Run{RunID: d.run.ID, ThreadID: d.run.ThreadID},
		Prompt: d.start.Prompt, Args: d.start.Args, Env: d.start.Env,
		Model: d.start.Model, Auth: d.start.Auth, Options: d.start.Options,
		Secrets: d.secrets(), Policy: d.def.Policy, Scripts: scripts,
		Session:    d.r.previousSession(d.ctx, d.run),
		SkillRoots: ws.SkillRoots(), MCPServers: mcp,
		WorkspaceRoot: d.handle.WorkspaceRoot(), RunDir: paths.Files,
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
	return journal.Start(d.ctx, d.handle, journal.Spec{Paths: paths, Nonce: d.run.JournalNonce, Agent: inv.Command, Stdin: inv.Stdin, Diff: true, KeepBackground: d.def.Lifecycle.KeepBackground})
}

var errCancelledBeforeStart = errors.New("run: cancelled before the agent started")

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
		PollInterval: d.r.opts.PollInterval, FirstByteTimeout: d.r.opts.FirstByteTimeout}
	if rd.FirstByteTimeout == 0 && d.start == nil {
		// A taken-over run's journal exists or never will.
		rd.FirstByteTimeout = 10 * time.Second
	}
	lines := make(chan journal.Line, 1024)
	result := make(chan readResult, 1)
	readCtx, stopRead := context.WithCancel(d.ctx)
	defer stopRead()
	go func() {
		exit, err := rd.Read(readCtx, 0, func(l journal.Line) error {
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
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				res := <-result
				return d.finish(res, cancelled)
			}
			evs := d.tr.Line(l.Data)
			if l.Diff != nil {
				evs = []event.Event{fileChanged(l.Diff)}
				if d.produced >= d.stored { // new, not a replay: tell the hook once
					d.fileHook(l.Diff)
				}
			}
			if err := d.emit(evs); err != nil {
				return err
			}
			if len(d.pending) >= d.r.opts.BatchSize {
				if err := d.flush(d.ctx); err != nil {
					return err
				}
			}
		case <-flushT.C:
			if err := d.flush(d.ctx); err != nil {
				return err
			}
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

// stopAgent acts on a cancel: kill the agent where processes can be killed
// (its wrapper then records the exit), destroy the sandbox elsewhere.
func (d *driver) stopAgent(paths journal.Paths) {
	// Not d.ctx: the driver ends as soon as the agent dies, and the kill
	// must not be cut short by that.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(d.ctx), time.Minute)
	defer cancel()
	harness.Interrupt(ctx, d.h, d.run.ID) // the agent may end its turn itself first (ACP session/cancel)
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
		if err := d.emit(evs); err != nil {
			return err
		}
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
		if err := d.emit([]event.Event{cancelEvent(d.run, nil)}); err != nil {
			return err
		}
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
		if err := d.emit([]event.Event{cancelEvent(d.run, nil)}); err != nil {
			return err
		}
		return d.finalize(store.RunCancelled, nil, "")
	}
	msg := d.secrets().Redact(err.Error())
	if e := d.emit([]event.Event{{Type: event.RunError, ThreadID: d.run.ThreadID, RunID: d.run.ID, Message: msg, Code: code}}); e != nil {
		return e
	}
	return d.finalize(store.RunFailed, nil, msg)
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
		msg += ": " + strings.TrimSpace(d.secrets().Redact(tail))
	}
	return msg
}

func (d *driver) secrets() sandbox.Secrets { return d.def.Workspace.SecretsOrEmpty() }

func cancelEvent(run store.Run, code *int) event.Event {
	return event.Event{Type: event.RunError, ThreadID: run.ThreadID, RunID: run.ID, Message: "the run was cancelled", Code: "cancelled", ExitCode: code}
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
	if len(d.remove) > 0 {
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
	// A cancelled run keeps its sandbox where the agent could be killed:
	// the thread's work is in it. (Where it could not, the cancel already
	// destroyed it.)
	if (lc.DestroyOnComplete && (status == store.RunCompleted || status == store.RunFailed)) || lc.Reuse == sandbox.ReuseNone {
		if err := d.r.ensure.Destroy(ctx, d.def, req); err != nil {
			d.r.log.Warn("run: destroying the sandbox after the run failed", "run", d.run.ID, "err", err)
		}
		return
	}
	if lc.SnapshotModeFor(d.def.Provider.Capabilities()) == sandbox.SnapshotAfterRun && d.handle.Capabilities().Snapshots {
		snap, err := d.handle.Snapshot(ctx, "after-run-"+d.run.ID)
		if err != nil {
			d.r.log.Warn("run: snapshot after the run failed", "run", d.run.ID, "err", err)
			return
		}
		key := d.def.KeyFor(d.run.ThreadID, d.run.ID, d.run.Tenant)
		inst, ok, err := d.r.store.GetInstance(ctx, key)
		if err != nil || !ok || inst.ProviderSandboxID != d.handle.ID() {
			return
		}
		old := inst.LatestSnapshotID
		inst.LatestSnapshotID = snap.ID
		inst.UpdatedAt = time.Time{}
		if err := d.r.store.PutInstance(ctx, inst); err != nil {
			d.r.log.Warn("run: recording the after-run snapshot failed", "run", d.run.ID, "err", err)
			return
		}
		if old != "" && old != snap.ID {
			if err := d.def.Provider.DeleteSnapshot(ctx, old); err != nil {
				d.r.log.Debug("run: deleting the superseded snapshot failed", "run", d.run.ID, "snapshot", old, "err", err)
			}
		}
	}
}

// emit takes translated events: those the log already holds (a replay
// after a takeover) are checked against it and skipped; the rest are
// queued for the next append.
func (d *driver) emit(evs []event.Event) error {
	for _, e := range evs {
		d.produced++
		data := e.Marshal()
		if d.produced <= d.stored {
			stored, err := d.storedEvent(d.produced)
			if err != nil {
				return err
			}
			if stored.Type != string(e.Type) || !bytes.Equal(stored.Data, data) {
				return fmt.Errorf("%w at event %d: stored %s, replayed %s", errDiverged, d.produced, stored.Data, data)
			}
			continue
		}
		d.pending = append(d.pending, store.NewEvent{Type: string(e.Type), Data: data})
	}
	return nil
}

// storedEvent returns stored event seq, reading the log in batches.
func (d *driver) storedEvent(seq int64) (store.Event, error) {
	if len(d.verify) == 0 || d.verify[0].Seq > seq || d.verify[len(d.verify)-1].Seq < seq {
		evs, err := d.r.store.ReadEvents(d.ctx, d.run.ID, seq-1, 1000)
		if err != nil {
			return store.Event{}, err
		}
		if len(evs) == 0 || evs[0].Seq != seq {
			return store.Event{}, fmt.Errorf("%w: stored event %d is missing", errDiverged, seq)
		}
		d.verify = evs
	}
	return d.verify[seq-d.verify[0].Seq], nil
}

// flush appends the pending events, fenced by the driver epoch and the
// expected next sequence number.
func (d *driver) flush(ctx context.Context) error {
	if len(d.pending) == 0 {
		return nil
	}
	d.mu.Lock()
	first := d.lastSeq + 1
	d.mu.Unlock()
	if err := d.r.store.AppendEvents(ctx, d.run.ID, d.run.DriverEpoch, first, d.pending); err != nil {
		return err
	}
	d.mu.Lock()
	d.lastSeq += int64(len(d.pending))
	d.mu.Unlock()
	d.pending = d.pending[:0]
	d.broadcast()
	return nil
}

func (d *driver) broadcast() {
	d.mu.Lock()
	close(d.notify)
	d.notify = make(chan struct{})
	d.mu.Unlock()
}

// changed returns a channel closed at the next append (or when driving
// stops) and the last sequence number now.
func (d *driver) changed() (<-chan struct{}, int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.notify, d.lastSeq
}

func (d *driver) cancelRequested() (bool, error) {
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

// fileChanged is the event for the wrapper's working-tree diff.
func fileChanged(d *journal.Diff) event.Event {
	var files []string
	seen := map[string]bool{}
	for _, line := range strings.Split(string(d.Patch), "\n") {
		rest, ok := strings.CutPrefix(line, "diff --git a/")
		if !ok {
			continue
		}
		if i := strings.Index(rest, " b/"); i >= 0 {
			name := rest[i+3:]
			if !seen[name] {
				seen[name] = true
				files = append(files, name)
			}
		}
	}
	if files == nil {
		files = []string{}
	}
	return event.CustomEvent(event.FileChanged, event.FileChange{Patch: string(d.Patch), Files: files, Truncated: d.Truncated})
}

// fileHook tells the definition's OnFile hook about each file the run
// changed (once, when the diff is first read); a panicking or slow hook
// cannot stop the run.
func (d *driver) fileHook(diff *journal.Diff) {
	hook := d.def.Hooks.OnFile
	if hook == nil {
		return
	}
	for _, ev := range fileEvents(diff.Patch) {
		func() {
			defer func() {
				if p := recover(); p != nil {
					d.r.log.Warn("run: the OnFile hook panicked", "run", d.run.ID, "panic", p)
				}
			}()
			hook(d.ctx, ev)
		}()
	}
}

// fileEvents reads a git patch into file events: create for new files,
// delete for deleted ones, change otherwise.
func fileEvents(patch []byte) []sandbox.FileEvent {
	var out []sandbox.FileEvent
	for _, chunk := range strings.Split(string(patch), "\ndiff --git ") {
		chunk = strings.TrimPrefix(chunk, "diff --git ")
		head, _, _ := strings.Cut(chunk, "\n")
		i := strings.Index(head, " b/")
		if !strings.HasPrefix(head, "a/") || i < 0 {
			continue
		}
		op := "change"
		switch {
		case strings.Contains(chunk, "\nnew file mode"):
			op = "create"
		case strings.Contains(chunk, "\ndeleted file mode"):
			op = "delete"
		}
		out = append(out, sandbox.FileEvent{Op: op, Path: sandbox.PortablePath(head[i+3:])})
	}
	return out
}

func (d *driver) currentLease() store.Lease {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.lease
}

// keepLease watches the driver's lease. A lease can be lost without anyone
// else driving the run — renewals late on an overloaded store — so the
// driver tries to take it back: when it gets the lease again and its epoch
// is still the run's, it goes on (every write is fenced by the epoch, so
// this is safe); when another process holds the lease or claimed the run,
// it stops and writes nothing more.
func (d *driver) keepLease() {
	for {
		select {
		case <-d.currentLease().Lost():
		case <-d.ctx.Done():
			return
		}
		if d.ctx.Err() != nil {
			return
		}
		if !d.retakeLease() {
			d.r.log.Warn("run: driver lease lost; another process drives the run now", "run", d.run.ID)
			d.stop(errors.New("run: lease lost"))
			return
		}
		d.r.log.Info("run: driver lease lost and taken back", "run", d.run.ID)
	}
}

// retakeLease tries to get the run's lease back. A lease that is held is
// not proof that another driver took over: on an overloaded store the row
// may still be this driver's own, whose renewals came too late, until it
// expires. So the driver keeps trying until the lease is free again, and
// gives up only when another driver claimed the run (its epoch moved on),
// the run ended, or three lease lifetimes passed.
func (d *driver) retakeLease() bool {
	deadline := time.Now().Add(3 * d.r.opts.LeaseTTL)
	for time.Now().Before(deadline) && d.ctx.Err() == nil {
		lease, ok, err := d.r.store.TryLock(d.ctx, leaseName(d.run.ID), d.r.opts.LeaseTTL)
		if err == nil && ok {
			rec, found, err := d.r.store.GetRun(d.ctx, d.run.ID)
			if err == nil && found && rec.DriverEpoch == d.run.DriverEpoch && !rec.Status.Terminal() {
				d.mu.Lock()
				d.lease = lease
				d.mu.Unlock()
				return true
			}
			_ = lease.Release(context.WithoutCancel(d.ctx))
			return false
		}
		if err == nil && !ok {
			// Held: by a driver that claimed the run (stop), or by nobody
			// live yet (this driver's own stale row: wait for it to expire).
			rec, found, err := d.r.store.GetRun(d.ctx, d.run.ID)
			if err == nil && (!found || rec.DriverEpoch != d.run.DriverEpoch || rec.Status.Terminal()) {
				return false
			}
		}
		select {
		case <-d.ctx.Done():
			return false
		case <-time.After(d.r.opts.LeaseTTL / 10):
		}
	}
	return false
}
