package sandbox

import (
	"context"
	"time"
)

// Definition describes a kind of sandbox: which provider, what workspace,
// which policy, and how long instances live. Ensure (package
// sandbox/ensure) turns a definition and a thread into a live sandbox.
type Definition struct {
	// ID names the definition; it is part of the sandbox key.
	ID string
	// Provider makes the sandboxes.
	Provider Provider
	// Workspace is what the agent finds; nil is an empty workspace.
	Workspace *Workspace
	// Policy guards what the agent may do; nil asks for everything.
	Policy *Policy
	// Lifecycle says how instances are reused, snapshotted and reclaimed.
	Lifecycle Lifecycle
	// Hooks are called at points of an instance's life.
	Hooks Hooks
	// Retention says what the stores keep of this definition's runs once
	// they have ended: "all" (or ""), "sandbox" (no prompt, no event text,
	// no conversation) or "none" (nothing). See store.Retention; a run
	// gets the strictest of its request's, its definition's and the
	// runner's default.
	Retention string
}

// Reuse says which runs share a sandbox.
type Reuse string

// Reuse modes.
const (
	// ReuseThread (the default) gives every run of a thread the same
	// sandbox.
	ReuseThread Reuse = "thread"
	// ReuseNone gives every run a fresh sandbox.
	ReuseNone Reuse = "none"
)

// SnapshotMode says when a provider-native snapshot is taken.
type SnapshotMode string

// Snapshot modes. The empty mode means AfterSetup when the provider has
// snapshots and None otherwise.
const (
	SnapshotAfterSetup SnapshotMode = "after-setup"
	SnapshotAfterRun   SnapshotMode = "after-run"
	SnapshotNone       SnapshotMode = "none"
)

// Lifecycle says how sandbox instances are reused, snapshotted and
// reclaimed.
type Lifecycle struct {
	// Reuse is ReuseThread (default) or ReuseNone.
	Reuse Reuse
	// Snapshot is when to snapshot; see SnapshotMode.
	Snapshot SnapshotMode
	// SnapshotMaxAge, when positive, makes an instance record older than
	// this (since its last use) stale: it is neither resumed nor restored,
	// and a fresh sandbox is created.
	SnapshotMaxAge time.Duration
	// DestroyOnComplete destroys the sandbox when a run completes or fails
	// (never when it is detached).
	DestroyOnComplete bool
	// KeepAlive, when positive, is the idle time after which the reaper
	// destroys the sandbox (its record stays, so the next ensure restores
	// the latest snapshot or creates anew). It is the older name of
	// Idle.Destroy: set either, or both to the same value; two different
	// values are refused. IdleTimes resolves them.
	KeepAlive time.Duration
	// Idle says when an idle sandbox is paused and when it is destroyed
	// (see Idle for what idle means).
	Idle Idle
	// KeepBackground keeps the processes a run's agent leaves running when
	// it exits (a dev server for the thread's next run). By default nothing
	// a run started outlives it. A cancel kills them either way. A kept
	// process must not write to the agent's stdout after the run (redirect
	// it): such output follows the run's exit line, and the run then reads
	// as lost.
	KeepBackground bool
	// Checkpoint is when corral takes a portable checkpoint of the thread's
	// workspace into its store (besides the one taken before an idle
	// sandbox is destroyed): "after-run" after every run that completes or
	// fails, "" never.
	Checkpoint CheckpointMode
	// CheckpointKeep, when positive, keeps only the newest CheckpointKeep
	// checkpoints of each of the definition's threads (and the head):
	// the retention pass prunes the rest. Zero leaves it to the daemon's
	// default (run.ForgetOptions.CheckpointKeep).
	CheckpointKeep int
	// CheckpointMaxAge, when positive, makes the retention pass prune the
	// checkpoints older than this (never the head). Zero leaves it to the
	// daemon's default.
	CheckpointMaxAge time.Duration
}

// CheckpointMode says when a checkpoint is taken automatically.
type CheckpointMode string

// Checkpoint modes.
const (
	// CheckpointNever (the default) takes one only before an idle sandbox
	// is destroyed, and when asked.
	CheckpointNever CheckpointMode = ""
	// CheckpointAfterRun takes one after every run that completes or fails.
	CheckpointAfterRun CheckpointMode = "after-run"
)

// Idle is the idle policy of a definition's sandboxes. A sandbox is idle
// from the end (FinishedAt) of the last run of its thread that used it; a
// sandbox with a live run (running, attached or detached) is not idle at
// all, nor is one whose last run ended with an approval request nobody has
// answered yet (the thread's next run answers it), until ApprovalWait has
// passed. Every field is optional; zero turns that step off.
type Idle struct {
	// Pause, when positive, is the idle time after which the sandbox is
	// paused where its provider can pause (sandbox.Pauser): it stops
	// costing compute, keeps its files, and the thread's next ensure
	// starts it again. Providers that cannot pause skip this step. It must
	// be shorter than Destroy when both are set.
	Pause time.Duration
	// Destroy, when positive, is the idle time after which the sandbox is
	// destroyed (paused or not); its record stays, so the thread's next
	// ensure restores its latest snapshot or creates anew. Lifecycle's
	// KeepAlive is the same setting under its older name.
	Destroy time.Duration
	// ApprovalWait caps how long an unanswered approval request of the
	// last run holds the sandbox: past it, idle counts from the end of the
	// wait. Zero waits without a cap: an agent that asks and never gets an
	// answer then holds its sandbox until the thread's next run, so set a
	// cap where threads may be abandoned.
	ApprovalWait time.Duration
}

// IdleTimes returns the effective idle pause and destroy times: Idle.Pause,
// and Idle.Destroy or, when that is zero, KeepAlive. Zero means never.
func (l Lifecycle) IdleTimes() (pause, destroy time.Duration) {
	destroy = l.Idle.Destroy
	if destroy == 0 {
		destroy = l.KeepAlive
	}
	return l.Idle.Pause, destroy
}

// SnapshotModeFor resolves the empty mode against the provider's
// capabilities.
func (l Lifecycle) SnapshotModeFor(caps Capabilities) SnapshotMode {
	switch {
	case l.Snapshot != "":
		return l.Snapshot
	case caps.Snapshots:
		return SnapshotAfterSetup
	}
	return SnapshotNone
}

// Validate checks the lifecycle's values.
func (l Lifecycle) Validate() error {
	switch l.Reuse {
	case "", ReuseThread, ReuseNone:
	default:
		return Errorf(InvalidArgument, "lifecycle", "reuse", "%q is not thread or none", l.Reuse)
	}
	switch l.Snapshot {
	case "", SnapshotAfterSetup, SnapshotAfterRun, SnapshotNone:
	default:
		return Errorf(InvalidArgument, "lifecycle", "snapshot", "%q is not after-setup, after-run or none", l.Snapshot)
	}
	switch l.Checkpoint {
	case CheckpointNever, CheckpointAfterRun:
	default:
		return Errorf(InvalidArgument, "lifecycle", "checkpoint", "%q is not after-run (or empty)", l.Checkpoint)
	}
	if l.CheckpointKeep < 0 {
		return Errorf(InvalidArgument, "lifecycle", "checkpointKeep", "%d is negative", l.CheckpointKeep)
	}
	if l.SnapshotMaxAge < 0 || l.CheckpointMaxAge < 0 || l.KeepAlive < 0 || l.Idle.Pause < 0 || l.Idle.Destroy < 0 || l.Idle.ApprovalWait < 0 {
		return Errorf(InvalidArgument, "lifecycle", "", "durations must not be negative")
	}
	if l.KeepAlive > 0 && l.Idle.Destroy > 0 && l.KeepAlive != l.Idle.Destroy {
		return Errorf(InvalidArgument, "lifecycle", "idle.destroy", "keepAlive %s and idle.destroy %s disagree: keepAlive is the older name of idle.destroy, set one", l.KeepAlive, l.Idle.Destroy)
	}
	if pause, destroy := l.IdleTimes(); pause > 0 && destroy > 0 && pause >= destroy {
		return Errorf(InvalidArgument, "lifecycle", "idle.pause", "idle.pause %s must be shorter than the destroy time %s", pause, destroy)
	}
	return nil
}

// Hooks are called at points of a sandbox instance's life. Every field is
// optional.
type Hooks struct {
	// OnReady runs after the sandbox is ensured (created, resumed or
	// restored) and before it is handed out; an error fails the ensure.
	OnReady func(ctx context.Context, h Handle) error
	// OnError is told of an ensure that failed.
	OnError func(ctx context.Context, err error)
	// OnDestroy runs after an instance was destroyed, with its key.
	OnDestroy func(ctx context.Context, key string)
	// OnFile is told of each file a run changed (created, changed or
	// deleted, from the run's working-tree diff in a git work tree), once,
	// when the run ends; a panic in it is logged and ignored.
	OnFile func(ctx context.Context, ev FileEvent)
}

// Validate checks the definition.
func (d *Definition) Validate() error {
	switch {
	case d == nil:
		return Errorf(InvalidArgument, "definition", "", "nil definition")
	case d.ID == "":
		return Errorf(InvalidArgument, "definition", "", "a definition needs an id")
	case d.Provider == nil:
		return Errorf(InvalidArgument, "definition", d.ID, "a definition needs a provider")
	}
	switch d.Retention {
	case "", "all", "sandbox", "none":
	default:
		return Errorf(InvalidArgument, "definition", d.ID, "retention %q: want all, sandbox or none", d.Retention)
	}
	if err := d.Workspace.Validate(); err != nil {
		return err
	}
	if err := d.Policy.Validate(); err != nil {
		return err
	}
	return d.Lifecycle.Validate()
}

// KeyFor returns the sandbox key of this definition for a thread (and, with
// ReuseNone, a run) and tenant.
func (d *Definition) KeyFor(thread, run, tenant string) string {
	t := thread
	if d.Lifecycle.Reuse == ReuseNone {
		t = thread + ":" + run
	}
	return Key(KeyInput{
		Thread:        t,
		Definition:    d.ID,
		Provider:      d.Provider.Name(),
		WorkspaceHash: d.Workspace.Hash(),
		Tenant:        tenant,
	})
}
