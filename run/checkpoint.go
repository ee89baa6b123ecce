package run

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/checkpoint"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store"
)

// writerTTL is how long a checkpoint writer lease lives: longer than any
// capture corral makes under it (a capture is bounded in files and bytes).
const writerTTL = 10 * time.Minute

// SaveCheckpoint asks for a checkpoint of a thread's workspace.
type SaveCheckpoint struct {
	Tenant string
	Thread string // required
	// Label names the checkpoint; optional.
	Label string
	// Reason is why it is taken; default store.CheckpointNamed.
	Reason store.CheckpointReason
	// SourceRun is the run after which it is taken; optional.
	SourceRun string
	// DuringRun is the live run whose agent asks for the checkpoint (an
	// agent tool): that run being live does not refuse the save, and it is
	// the checkpoint's source run. Another live run still does.
	DuringRun string
}

// CheckpointResult is a published checkpoint and what its capture skipped.
type CheckpointResult struct {
	Checkpoint store.Checkpoint     `json:"checkpoint"`
	Skipped    []checkpoint.Skipped `json:"skipped,omitempty"`
	BlobsPut   int                  `json:"blobsPut"`
}

// blobs returns the blob store checkpoints keep their files in.
func (r *Runner) blobs() store.BlobStore {
	if r.opts.Blobs != nil {
		return r.opts.Blobs
	}
	return r.store
}

// threadDefinition returns the definition of the thread's latest run, and
// that run.
func (r *Runner) threadDefinition(ctx context.Context, tenant, thread string) (*sandbox.Definition, store.Run, error) {
	runs, err := r.store.ListRuns(ctx, store.RunFilter{ThreadID: thread, Tenant: tenant})
	if err != nil {
		return nil, store.Run{}, err
	}
	for i := len(runs) - 1; i >= 0; i-- {
		if runs[i].Tenant != tenant {
			continue
		}
		def, ok := r.defs[runs[i].DefinitionID]
		if !ok {
			return nil, store.Run{}, sandbox.Errorf(sandbox.FailedPrecondition, "checkpoint", thread,
				"the thread's last run used definition %q, which this process does not have", runs[i].DefinitionID)
		}
		return def, runs[i], nil
	}
	return nil, store.Run{}, sandbox.Errorf(sandbox.NotFound, "checkpoint", thread, "the thread has no runs")
}

// Save captures the workspace of the thread's live sandbox (it never
// creates one) and publishes it as the thread's new head checkpoint. It is
// refused while a run of the thread is live (its agent may be writing),
// unless that run's agent asks (DuringRun), and
// while another writer holds the thread (store.ErrWriterConflict).
func (r *Runner) Save(ctx context.Context, req SaveCheckpoint) (CheckpointResult, error) {
	if req.Thread == "" {
		return CheckpointResult{}, sandbox.Errorf(sandbox.InvalidArgument, "checkpoint.save", "", "a thread is required")
	}
	if req.Reason == "" {
		req.Reason = store.CheckpointNamed
	}
	if active, ok, err := r.store.ActiveRun(ctx, req.Thread, req.Tenant); err != nil {
		return CheckpointResult{}, err
	} else if ok && active.ID != req.DuringRun {
		return CheckpointResult{}, sandbox.Errorf(sandbox.FailedPrecondition, "checkpoint.save", req.Thread,
			"run %s of the thread is live; save once it has ended", active.ID)
	}
	if req.DuringRun != "" && req.SourceRun == "" {
		req.SourceRun = req.DuringRun
	}
	def, last, err := r.threadDefinition(ctx, req.Tenant, req.Thread)
	if err != nil {
		return CheckpointResult{}, err
	}
	res, ok, err := r.ensure.EnsureExisting(ctx, def, ensure.Request{Thread: req.Thread, Tenant: req.Tenant, Run: last.ID})
	if err != nil {
		return CheckpointResult{}, err
	}
	if !ok {
		return CheckpointResult{}, sandbox.Errorf(sandbox.FailedPrecondition, "checkpoint.save", req.Thread,
			"the thread's sandbox is gone: there is nothing to capture (its last checkpoint, if any, is the head)")
	}
	if req.SourceRun == "" {
		req.SourceRun = last.ID
	}
	return r.capture(ctx, def, res.Handle, req, last.Retention)
}

// capture takes the thread's writer lease, captures h's workspace and
// publishes the checkpoint as the new head. A blob sweep that began during
// the capture (store.ErrBlobSwept: a blob it found may be gone) makes it
// capture again under a new lease, a few times.
func (r *Runner) capture(ctx context.Context, def *sandbox.Definition, h sandbox.Handle, req SaveCheckpoint, retention store.Retention) (CheckpointResult, error) {
	for attempt := 1; ; attempt++ {
		res, err := r.captureOnce(ctx, def, h, req, retention)
		if !errors.Is(err, store.ErrBlobSwept) || attempt == 3 {
			return res, err
		}
		r.log.Info("run: a blob sweep ran during a capture; capturing again", "thread", req.Thread, "attempt", attempt)
	}
}

func (r *Runner) captureOnce(ctx context.Context, def *sandbox.Definition, h sandbox.Handle, req SaveCheckpoint, retention store.Retention) (CheckpointResult, error) {
	w, err := r.store.AcquireWriter(ctx, req.Tenant, req.Thread, writerTTL)
	if err != nil {
		return CheckpointResult{}, err
	}
	defer func() { _ = r.store.ReleaseWriter(context.WithoutCancel(ctx), w) }()
	// One list of values to keep out of both the files and the
	// conversation: the workspace's secrets and the run's tools token.
	values := secretValues(def.Workspace.SecretsOrEmpty())
	values = append(values, r.toolsTokenOf(ctx, req.DuringRun)...)
	blobs := r.blobs()
	got, err := checkpoint.Capture(ctx, h.FS(), sandbox.WorkspaceRoot, checkpoint.CaptureOptions{
		Rules: checkpointRules(def), Secrets: values}, blobs)
	if err != nil {
		return CheckpointResult{}, err
	}
	conv := ""
	if !retention.Forgets() {
		if conv, err = r.putConversation(ctx, req.Tenant, req.Thread, blobs, values); err != nil {
			return CheckpointResult{}, err
		}
	}
	head, _, err := r.store.Head(ctx, req.Tenant, req.Thread)
	if err != nil {
		return CheckpointResult{}, err
	}
	cp, err := r.store.AppendCheckpoint(ctx, store.Checkpoint{
		ID: NewID("ckpt"), ThreadID: req.Thread, Tenant: req.Tenant, Parent: head, CreatedAt: r.opts.Now(),
		Reason: req.Reason, Label: req.Label, SourceRunID: req.SourceRun,
		Entries: got.Entries, Conversation: conv, Bytes: got.Bytes,
	}, head, w)
	if err != nil {
		return CheckpointResult{}, err
	}
	return CheckpointResult{Checkpoint: cp, Skipped: got.Skipped, BlobsPut: got.BlobsPut}, nil
}

// secretValues are the values of secrets, to redact.
func secretValues(secrets sandbox.Secrets) []string {
	var values []string
	for _, n := range secrets.Names() {
		if v, ok := secrets.Value(n); ok {
			values = append(values, v)
		}
	}
	return values
}

// checkpointRules are the capture and restore rules of def's workspace.
func checkpointRules(def *sandbox.Definition) checkpoint.Rules {
	return checkpoint.Rules{Projected: checkpoint.ProjectedFiles(def.Workspace)}
}

// Conversation is a thread's conversation as a checkpoint keeps it.
type Conversation struct {
	Thread string             `json:"thread"`
	Runs   []ConversationTurn `json:"runs"`
}

// ConversationTurn is one run of a thread in a checkpoint's conversation.
type ConversationTurn struct {
	ID         string          `json:"id"`
	Harness    string          `json:"harness,omitempty"`
	Prompt     string          `json:"prompt,omitempty"`
	Status     string          `json:"status"`
	ExitCode   *int            `json:"exitCode,omitempty"`
	CreatedAt  time.Time       `json:"createdAt"`
	FinishedAt time.Time       `json:"finishedAt,omitzero"`
	Events     []store.Event   `json:"events"`
	Extra      json.RawMessage `json:"extra,omitempty"`
}

// putConversation stores the thread's runs and their events as one blob
// (the secret values redacted) and returns its digest.
func (r *Runner) putConversation(ctx context.Context, tenant, thread string, blobs store.BlobStore, secretValues []string) (string, error) {
	runs, err := r.store.ListRuns(ctx, store.RunFilter{ThreadID: thread, Tenant: tenant})
	if err != nil {
		return "", err
	}
	conv := Conversation{Thread: thread}
	for _, run := range runs {
		if run.Tenant != tenant {
			continue
		}
		evs, err := r.store.ReadEvents(ctx, run.ID, 0, 0)
		if err != nil {
			return "", err
		}
		conv.Runs = append(conv.Runs, ConversationTurn{ID: run.ID, Harness: run.Harness, Prompt: run.Prompt,
			Status: string(run.Status), ExitCode: run.ExitCode, CreatedAt: run.CreatedAt, FinishedAt: run.FinishedAt, Events: evs})
	}
	data, err := json.Marshal(conv)
	if err != nil {
		return "", sandbox.Wrap(sandbox.Internal, "checkpoint.conversation", thread, err)
	}
	data = checkpoint.Redact(data, secretValues)
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	if ok, err := blobs.HasBlob(ctx, digest); err != nil {
		return "", err
	} else if !ok {
		if err := blobs.PutBlob(ctx, digest, bytes.NewReader(data), int64(len(data))); err != nil {
			return "", err
		}
	}
	return digest, nil
}

// Checkpoints lists a thread's checkpoints, oldest first, and its head.
func (r *Runner) Checkpoints(ctx context.Context, tenant, thread string) ([]store.Checkpoint, string, error) {
	cps, err := r.store.ListCheckpoints(ctx, tenant, thread)
	if err != nil {
		return nil, "", err
	}
	head, _, err := r.store.Head(ctx, tenant, thread)
	return cps, head, err
}

// Fork makes thread dst (a fresh id when empty) start from checkpoint id
// of thread src (its head when empty): dst's only checkpoint is a fork
// root with the same files and conversation, and dst's next run restores
// it. src is not changed. dst must be new.
func (r *Runner) Fork(ctx context.Context, tenant, src, id, dst string) (store.Checkpoint, error) {
	if src == "" {
		return store.Checkpoint{}, sandbox.Errorf(sandbox.InvalidArgument, "checkpoint.fork", "", "a source thread is required")
	}
	if id == "" {
		head, ok, err := r.store.Head(ctx, tenant, src)
		if err != nil {
			return store.Checkpoint{}, err
		}
		if !ok {
			return store.Checkpoint{}, sandbox.Errorf(sandbox.NotFound, "checkpoint.fork", src, "the thread has no checkpoint to fork from")
		}
		id = head
	}
	if dst == "" {
		dst = NewID("thread")
	}
	w, err := r.store.AcquireWriter(ctx, tenant, dst, writerTTL)
	if err != nil {
		return store.Checkpoint{}, err
	}
	defer func() { _ = r.store.ReleaseWriter(context.WithoutCancel(ctx), w) }()
	return r.store.ForkCheckpoint(ctx, tenant, src, id, dst, NewID("ckpt"), r.opts.Now(), w)
}

// RestoreCheckpoint makes the workspace of the thread's sandbox equal to
// checkpoint id (its head when empty), creating the sandbox from def (the
// definition of the thread's last run when nil) if it is gone. It is
// refused while a run of the thread is live.
func (r *Runner) RestoreCheckpoint(ctx context.Context, tenant, thread, id string, def *sandbox.Definition) (checkpoint.RestoreResult, error) {
	const op = "checkpoint.restore"
	if active, ok, err := r.store.ActiveRun(ctx, thread, tenant); err != nil {
		return checkpoint.RestoreResult{}, err
	} else if ok {
		return checkpoint.RestoreResult{}, sandbox.Errorf(sandbox.FailedPrecondition, op, thread,
			"run %s of the thread is live; restore once it has ended", active.ID)
	}
	if id == "" {
		head, ok, err := r.store.Head(ctx, tenant, thread)
		if err != nil {
			return checkpoint.RestoreResult{}, err
		}
		if !ok {
			return checkpoint.RestoreResult{}, sandbox.Errorf(sandbox.NotFound, op, thread, "the thread has no checkpoint")
		}
		id = head
	}
	cp, err := r.store.GetCheckpoint(ctx, tenant, thread, id)
	if err != nil {
		return checkpoint.RestoreResult{}, err
	}
	var last store.Run
	if def == nil {
		if def, last, err = r.threadDefinition(ctx, tenant, thread); err != nil {
			return checkpoint.RestoreResult{}, err
		}
	}
	res, err := r.ensure.Ensure(ctx, def, ensure.Request{Thread: thread, Tenant: tenant, Run: last.ID})
	if err != nil {
		return checkpoint.RestoreResult{}, err
	}
	return checkpoint.Restore(ctx, res.Handle.FS(), sandbox.WorkspaceRoot, cp.Entries, r.blobs(), checkpoint.RestoreOptions{Rules: checkpointRules(def)})
}

// restoreHead is ensure's checkpoint step: a sandbox made afresh for a
// thread that has a head checkpoint gets the checkpoint's files.
func (r *Runner) restoreHead(ctx context.Context, def *sandbox.Definition, req ensure.Request, h sandbox.Handle) (bool, error) {
	head, ok, err := r.store.Head(ctx, req.Tenant, req.Thread)
	if err != nil || !ok {
		return false, err
	}
	cp, err := r.store.GetCheckpoint(ctx, req.Tenant, req.Thread, head)
	if err != nil {
		return false, err
	}
	if _, err := checkpoint.Restore(ctx, h.FS(), sandbox.WorkspaceRoot, cp.Entries, r.blobs(), checkpoint.RestoreOptions{Rules: checkpointRules(def)}); err != nil {
		return false, err
	}
	return true, nil
}

// beforeDestroy is the reaper's hook before it destroys an idle sandbox of
// def: the caller's hook when given, else a checkpoint of the thread (reason
// before-destroy) taken through the handle the reaper holds.
func (r *Runner) beforeDestroy(def *sandbox.Definition, hook func(context.Context, store.Instance, sandbox.Handle) error) func(context.Context, store.Instance, sandbox.Handle) error {
	if hook != nil {
		return hook
	}
	return func(ctx context.Context, inst store.Instance, h sandbox.Handle) error {
		runs, err := r.store.ListRuns(ctx, store.RunFilter{ThreadID: inst.ThreadID, Tenant: inst.Tenant})
		if err != nil {
			return err
		}
		var last store.Run
		for _, run := range runs {
			if run.Tenant == inst.Tenant {
				last = run
			}
		}
		_, err = r.capture(ctx, def, h, SaveCheckpoint{Tenant: inst.Tenant, Thread: inst.ThreadID,
			Reason: store.CheckpointBeforeDestroy, SourceRun: last.ID}, last.Retention)
		return err
	}
}
