// Package ensure turns a sandbox definition and a thread into a live
// sandbox, the same one every time the thread comes back: resume the
// recorded sandbox, else restore its latest snapshot, else create and
// bootstrap a new one — all under a lock on the sandbox key, so two
// processes (on two machines, with a shared store) never build two.
package ensure

import (
	"context"
	"log/slog"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/bootstrap"
	"github.com/d10ffeed/corral/store"
)

// Outcome says which path Ensure took.
type Outcome string

// Outcomes.
const (
	Created  Outcome = "created"
	Resumed  Outcome = "resumed"
	Restored Outcome = "restored"
	// FromCheckpoint: created afresh and given the thread's head
	// checkpoint (Manager.Checkpoint).
	FromCheckpoint Outcome = "checkpoint"
)

// Manager ensures and destroys sandbox instances, keeping their records in
// an instance store.
type Manager struct {
	// Instances records which provider sandbox each key maps to. Required.
	Instances store.InstanceStore
	// Locker serializes work on one key across processes. Required.
	Locker store.Locker
	// Logger receives reports of problems that do not fail the call.
	// Default: discard.
	Logger *slog.Logger
	// LockTTL is the lease of the per-key lock; it is renewed while held.
	// Default 30s.
	LockTTL time.Duration
	// DestroyTimeout bounds a destroy, which runs on a fresh context so a
	// cancelled caller cannot leave a live sandbox behind a deleted record.
	// Default 60s.
	DestroyTimeout time.Duration
	// OnStep, when set, is told of each setup step while a sandbox is
	// bootstrapped.
	OnStep func(bootstrap.StepEvent)
	// Checkpoint, when set, is the step between a native snapshot and a
	// bare bootstrap: a sandbox created afresh (no live sandbox, no
	// snapshot to restore) is handed to it after bootstrap, and it restores
	// the thread's head checkpoint into it (true) or finds none (false). An
	// error destroys the new sandbox and fails the ensure: a thread that
	// has a checkpoint never comes back silently empty.
	Checkpoint func(ctx context.Context, def *sandbox.Definition, req Request, h sandbox.Handle) (bool, error)
	// Now returns the time; default time.Now.
	Now func() time.Time
}

// Request says whose sandbox to ensure.
type Request struct {
	Thread string // the conversation or task the sandbox belongs to; required
	Run    string // the run that needs it (recorded; part of the key with ReuseNone)
	Tenant string // the tenant, part of the key
}

// Result is a live sandbox and how it was obtained.
type Result struct {
	Handle    sandbox.Handle
	Key       string
	Outcome   Outcome
	Bootstrap bootstrap.Result // what bootstrap did, when Outcome is Created or FromCheckpoint
}

func (m *Manager) log() *slog.Logger {
	if m.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return m.Logger
}

func (m *Manager) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Manager) lock(ctx context.Context, key string) (store.Lease, error) {
	ttl := m.LockTTL
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	return m.Locker.Lock(ctx, "sandbox:"+key, ttl)
}

func release(l store.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = l.Release(ctx)
}

func (m *Manager) check(def *sandbox.Definition, req Request) error {
	if m.Instances == nil || m.Locker == nil {
		return sandbox.Errorf(sandbox.FailedPrecondition, "ensure", "", "the manager needs an instance store and a locker")
	}
	if err := def.Validate(); err != nil {
		return err
	}
	if req.Thread == "" {
		return sandbox.Errorf(sandbox.InvalidArgument, "ensure", def.ID, "a thread is required")
	}
	if def.Lifecycle.Reuse == sandbox.ReuseNone && req.Run == "" {
		return sandbox.Errorf(sandbox.InvalidArgument, "ensure", def.ID, "reuse: none needs a run id")
	}
	return nil
}

// Ensure returns the thread's sandbox: resumed when its record is fresh and
// the sandbox still exists, restored from the latest snapshot when the
// sandbox is gone, created and bootstrapped otherwise. Secrets are applied
// on every path. A failed bootstrap destroys the half-made sandbox.
func (m *Manager) Ensure(ctx context.Context, def *sandbox.Definition, req Request) (res Result, err error) {
	if err := m.check(def, req); err != nil {
		return Result{}, err
	}
	defer func() {
		if err != nil && def.Hooks.OnError != nil {
			def.Hooks.OnError(ctx, err)
		}
	}()
	key := def.KeyFor(req.Thread, req.Run, req.Tenant)
	lease, err := m.lock(ctx, key)
	if err != nil {
		return Result{}, err
	}
	defer release(lease)

	res, err = m.ensureLocked(ctx, def, req, key)
	if err != nil {
		return Result{}, err
	}
	if def.Hooks.OnReady != nil {
		if err := def.Hooks.OnReady(ctx, res.Handle); err != nil {
			return Result{}, sandbox.Wrap(sandbox.FailedPrecondition, "ensure.on-ready", key, err)
		}
	}
	return res, nil
}

func (m *Manager) ensureLocked(ctx context.Context, def *sandbox.Definition, req Request, key string) (Result, error) {
	p := def.Provider
	caps := p.Capabilities()
	secrets := def.Workspace.SecretsOrEmpty()
	rec, found, err := m.Instances.GetInstance(ctx, key)
	if err != nil {
		return Result{}, err
	}
	if found && m.stale(def, rec) {
		m.log().Info("ensure: instance record is stale; creating anew", "key", key, "updated", rec.UpdatedAt)
		if rec.ProviderSandboxID != "" {
			m.destroyProvider(ctx, p, rec.ProviderSandboxID)
		}
		found = false
	}
	if found {
		if rec.ProviderSandboxID != "" {
			h, err := p.Resume(ctx, rec.ProviderSandboxID)
			switch {
			case err == nil:
				if err := applySecrets(ctx, h, secrets); err != nil {
					return Result{}, err
				}
				rec.LatestRunID, rec.UpdatedAt = req.Run, m.now()
				if err := m.Instances.PutInstance(ctx, rec); err != nil {
					return Result{}, err
				}
				return Result{Handle: h, Key: key, Outcome: Resumed}, nil
			case sandbox.CodeOf(err) != sandbox.NotFound:
				// The backend failed; creating a second sandbox now would
				// orphan the first.
				return Result{}, err
			}
		}
		if rec.LatestSnapshotID != "" && caps.Snapshots {
			h, err := p.RestoreSnapshot(ctx, rec.LatestSnapshotID, m.createOptions(def, req, key, secrets, ""))
			switch {
			case err == nil:
				if err := applySecrets(ctx, h, secrets); err != nil {
					m.destroyHandle(ctx, h)
					return Result{}, err
				}
				rec.ProviderSandboxID, rec.LatestRunID, rec.UpdatedAt = h.ID(), req.Run, m.now()
				if err := m.Instances.PutInstance(ctx, rec); err != nil {
					m.destroyHandle(ctx, h)
					return Result{}, err
				}
				return Result{Handle: h, Key: key, Outcome: Restored}, nil
			case sandbox.CodeOf(err) != sandbox.NotFound:
				return Result{}, err
			}
			m.log().Warn("ensure: the latest snapshot is gone; creating anew", "key", key, "snapshot", rec.LatestSnapshotID)
		}
	}
	return m.create(ctx, def, req, key, secrets)
}

func (m *Manager) create(ctx context.Context, def *sandbox.Definition, req Request, key string, secrets sandbox.Secrets) (Result, error) {
	p := def.Provider
	prep, err := bootstrap.Prepare(ctx, def.Workspace)
	if err != nil {
		return Result{}, err
	}
	h, err := p.Create(ctx, m.createOptions(def, req, key, secrets, prep.SourceDir))
	prep.Cleanup()
	if err != nil {
		return Result{}, err
	}
	bres, err := bootstrap.Run(ctx, h, def.Workspace, bootstrap.Options{OnStep: m.OnStep})
	if err != nil {
		m.destroyHandle(ctx, h)
		return Result{}, err
	}
	outcome := Created
	if m.Checkpoint != nil {
		restored, err := m.Checkpoint(ctx, def, req, h)
		if err != nil {
			m.destroyHandle(ctx, h)
			return Result{}, sandbox.Wrap(sandbox.CodeOf(err), "ensure.checkpoint", key, err)
		}
		if restored {
			outcome = FromCheckpoint
		}
	}
	rec := store.Instance{
		Key:               key,
		Provider:          p.Name(),
		ProviderSandboxID: h.ID(),
		ThreadID:          req.Thread,
		LatestRunID:       req.Run,
		DefinitionID:      def.ID,
		Tenant:            req.Tenant,
		CreatedAt:         m.now(),
	}
	if def.Lifecycle.SnapshotModeFor(p.Capabilities()) == sandbox.SnapshotAfterSetup && p.Capabilities().Snapshots {
		snap, err := h.Snapshot(ctx, "after-setup")
		if err != nil {
			m.log().Warn("ensure: snapshot after setup failed; continuing without one", "key", key, "err", err)
		} else {
			rec.LatestSnapshotID = snap.ID
		}
	}
	rec.UpdatedAt = m.now()
	if err := m.Instances.PutInstance(ctx, rec); err != nil {
		// Without a record the sandbox could never be found again.
		m.destroyHandle(ctx, h)
		return Result{}, err
	}
	return Result{Handle: h, Key: key, Outcome: outcome, Bootstrap: bres}, nil
}

func (m *Manager) createOptions(def *sandbox.Definition, req Request, key string, secrets sandbox.Secrets, sourceDir string) sandbox.CreateOptions {
	labels := map[string]string{"corral.definition": def.ID}
	if req.Tenant != "" {
		labels["corral.tenant"] = req.Tenant
	}
	return sandbox.CreateOptions{
		ID:        key,
		Env:       secrets.Env(),
		Network:   def.Policy.NetworkMode(),
		Egress:    def.Policy.EgressList(),
		Labels:    labels,
		SourceDir: sourceDir,
	}
}

func applySecrets(ctx context.Context, h sandbox.Handle, secrets sandbox.Secrets) error {
	if secrets.Len() == 0 {
		return nil
	}
	return h.SetEnv(ctx, secrets.Env())
}

func (m *Manager) stale(def *sandbox.Definition, rec store.Instance) bool {
	max := def.Lifecycle.SnapshotMaxAge
	return max > 0 && m.now().Sub(rec.UpdatedAt) > max
}

// EnsureExisting returns the thread's sandbox only if it can be resumed:
// it never creates or restores. ok is false when there is no fresh record
// or the sandbox is gone.
func (m *Manager) EnsureExisting(ctx context.Context, def *sandbox.Definition, req Request) (Result, bool, error) {
	if err := m.check(def, req); err != nil {
		return Result{}, false, err
	}
	key := def.KeyFor(req.Thread, req.Run, req.Tenant)
	lease, err := m.lock(ctx, key)
	if err != nil {
		return Result{}, false, err
	}
	defer release(lease)
	rec, found, err := m.Instances.GetInstance(ctx, key)
	if err != nil || !found || m.stale(def, rec) || rec.ProviderSandboxID == "" {
		return Result{}, false, err
	}
	h, err := def.Provider.Resume(ctx, rec.ProviderSandboxID)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return Result{}, false, nil
	}
	if err != nil {
		return Result{}, false, err
	}
	if err := applySecrets(ctx, h, def.Workspace.SecretsOrEmpty()); err != nil {
		return Result{}, false, err
	}
	rec.LatestRunID, rec.UpdatedAt = req.Run, m.now()
	if err := m.Instances.PutInstance(ctx, rec); err != nil {
		return Result{}, false, err
	}
	return Result{Handle: h, Key: key, Outcome: Resumed}, true, nil
}

// Destroy destroys the thread's sandbox and deletes its record. It runs on
// a fresh context bounded by DestroyTimeout, so a caller that was cancelled
// cannot leave a live sandbox behind a deleted record; the record is
// deleted only after the provider confirmed the destroy. A thread with no
// record is fine.
func (m *Manager) Destroy(ctx context.Context, def *sandbox.Definition, req Request) error {
	if err := m.check(def, req); err != nil {
		return err
	}
	return m.DestroyKey(ctx, def.Provider, def.KeyFor(req.Thread, req.Run, req.Tenant), def.Hooks.OnDestroy)
}

// DestroyKey destroys the sandbox recorded under key (see Destroy), and
// deletes its latest snapshot.
// onDestroy, when set, is called afterwards.
func (m *Manager) DestroyKey(ctx context.Context, p sandbox.Provider, key string, onDestroy func(context.Context, string)) error {
	timeout := m.DestroyTimeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	lease, err := m.lock(dctx, key)
	if err != nil {
		return err
	}
	defer release(lease)
	rec, found, err := m.Instances.GetInstance(dctx, key)
	if err != nil || !found {
		return err
	}
	if rec.ProviderSandboxID != "" {
		if err := p.Destroy(dctx, rec.ProviderSandboxID); err != nil {
			return err
		}
	}
	if err := m.Instances.DeleteInstance(dctx, key); err != nil {
		return err
	}
	// Without its record the snapshot could never be used again.
	if rec.LatestSnapshotID != "" && p.Capabilities().Snapshots {
		if err := p.DeleteSnapshot(dctx, rec.LatestSnapshotID); err != nil {
			m.log().Warn("ensure: deleting the destroyed sandbox's snapshot failed", "key", key, "snapshot", rec.LatestSnapshotID, "err", err)
		}
	}
	if onDestroy != nil {
		onDestroy(dctx, key)
	}
	return nil
}

// SnapshotAfterRun records the state a run left behind: when def's
// lifecycle asks for a snapshot after each run (and the provider and h can
// take one), it snapshots h and points the key's record at the new
// snapshot, then deletes the snapshot it superseded. All of it happens
// under the key's lock, like every other write of the record, so a
// concurrent Ensure, Destroy or reap never has its record overwritten with
// a stale copy, and the record never names a snapshot that was deleted.
//
// It does nothing (and returns ok false) when the lifecycle asks for no
// after-run snapshot, or when the record is gone or no longer names h's
// sandbox — the sandbox was destroyed or replaced meanwhile, and a snapshot
// of it would belong to nobody. A snapshot whose record could not be
// written is deleted again. The record is written as a full replace of the
// one read under the lock.
func (m *Manager) SnapshotAfterRun(ctx context.Context, def *sandbox.Definition, req Request, h sandbox.Handle) (snap sandbox.Snapshot, ok bool, err error) {
	const op = "ensure.snapshot-after-run"
	if err := m.check(def, req); err != nil {
		return sandbox.Snapshot{}, false, err
	}
	p := def.Provider
	if def.Lifecycle.SnapshotModeFor(p.Capabilities()) != sandbox.SnapshotAfterRun || !p.Capabilities().Snapshots || !h.Capabilities().Snapshots {
		return sandbox.Snapshot{}, false, nil
	}
	key := def.KeyFor(req.Thread, req.Run, req.Tenant)
	lease, err := m.lock(ctx, key)
	if err != nil {
		return sandbox.Snapshot{}, false, err
	}
	defer release(lease)
	rec, found, err := m.Instances.GetInstance(ctx, key)
	if err != nil {
		return sandbox.Snapshot{}, false, err
	}
	if !found || rec.ProviderSandboxID != h.ID() {
		return sandbox.Snapshot{}, false, nil
	}
	snap, err = h.Snapshot(ctx, "after-run-"+req.Run)
	if err != nil {
		return sandbox.Snapshot{}, false, sandbox.Wrap(sandbox.CodeOf(err), op, key, err)
	}
	old := rec.LatestSnapshotID
	rec.LatestSnapshotID, rec.UpdatedAt = snap.ID, m.now()
	if err := m.Instances.PutInstance(ctx, rec); err != nil {
		// The record still names the old snapshot; the new one would be
		// an orphan nobody could restore or delete.
		m.deleteSnapshot(ctx, p, key, snap.ID)
		return sandbox.Snapshot{}, false, err
	}
	if old != "" && old != snap.ID {
		m.deleteSnapshot(ctx, p, key, old)
	}
	return snap, true, nil
}

func (m *Manager) deleteSnapshot(ctx context.Context, p sandbox.Provider, key, id string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := p.DeleteSnapshot(dctx, id); err != nil {
		m.log().Warn("ensure: deleting a superseded snapshot failed", "key", key, "snapshot", id, "err", err)
	}
}

func (m *Manager) destroyHandle(ctx context.Context, h sandbox.Handle) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := h.Destroy(dctx); err != nil {
		m.log().Warn("ensure: destroying a half-made sandbox failed", "sandbox", h.ID(), "err", err)
	}
}

func (m *Manager) destroyProvider(ctx context.Context, p sandbox.Provider, id string) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := p.Destroy(dctx, id); err != nil {
		m.log().Warn("ensure: destroying a stale sandbox failed", "sandbox", id, "err", err)
	}
}
