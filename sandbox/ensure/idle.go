package ensure

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// IdleAction is what the idle reaper does with one sandbox.
type IdleAction string

// Idle actions.
const (
	// IdleKeep leaves the sandbox as it is.
	IdleKeep IdleAction = "keep"
	// IdlePause pauses it (sandbox.Pauser) and keeps its record as it is.
	IdlePause IdleAction = "pause"
	// IdleDestroy destroys it after IdleOptions.BeforeDestroy; the record
	// stays, without a sandbox id.
	IdleDestroy IdleAction = "destroy"
)

// IdleState is what ReapIdle knows of one instance when it asks what to
// do with it.
type IdleState struct {
	// Instance is the record as listed.
	Instance store.Instance
	// Paused says the provider reports the sandbox paused
	// (sandbox.PauseReporter); false when it cannot say.
	Paused bool
	// CanPause says the provider's handles can pause (the provider
	// reports pauses and its handle implements sandbox.Pauser).
	CanPause bool
}

// IdleOptions tune a ReapIdle pass. Every field is optional.
type IdleOptions struct {
	// Limit bounds the instances one pass looks at; each pass starts at a
	// random one, so kept ones do not starve the rest. Default 25.
	Limit int
	// Now is the pass's time; zero is the manager's Now.
	Now time.Time
	// Decide says what to do with an instance. Nil counts idle time from
	// the record's UpdatedAt (its last ensure), knowing nothing of runs;
	// package run decides from the thread's runs and approvals instead.
	// An error keeps the instance (logged, counted as failed).
	Decide func(ctx context.Context, st IdleState) (IdleAction, error)
	// BeforeDestroy is called with the sandbox (resumed, so a paused one
	// is running again) before it is destroyed: the place to take a
	// checkpoint. An error keeps the sandbox — paused again when it was
	// paused — and is logged and counted (IdleReport.HookFailed), so
	// nothing is lost.
	BeforeDestroy func(ctx context.Context, inst store.Instance, h sandbox.Handle) error
}

// IdleReport is what a ReapIdle pass did.
type IdleReport struct {
	Paused     int // sandboxes paused
	Destroyed  int // sandboxes destroyed
	HookFailed int // destroys not done because BeforeDestroy failed
	Failed     int // instances whose decision, pause or destroy failed
}

// ReapIdle enforces def's idle policy (Lifecycle.Idle, KeepAlive): each
// instance of def that has a sandbox is paused or destroyed as
// opts.Decide says. A paused sandbox is not marked in the record: the
// provider is asked on each pass (sandbox.PauseReporter), and Resume of a
// paused sandbox starts it again, so the thread's next ensure needs no
// record of it either. An instance ensured within the shortest of the idle
// times is not looked at (idle counts from a run's end, which comes after
// the ensure that started it). Every action happens under the key's lock,
// taken without waiting (an instance being ensured is skipped), and only
// when the record was not used meanwhile. A failure on one instance never
// stops the pass.
func (m *Manager) ReapIdle(ctx context.Context, def *sandbox.Definition, opts IdleOptions) (IdleReport, error) {
	var rep IdleReport
	pause, destroy := def.Lifecycle.IdleTimes()
	if pause <= 0 && destroy <= 0 {
		return rep, nil
	}
	now := opts.Now
	if now.IsZero() {
		now = m.now()
	}
	limit := opts.Limit
	if limit <= 0 {
		limit = 25
	}
	shortest := destroy
	if pause > 0 && (shortest <= 0 || pause < shortest) {
		shortest = pause
	}
	// UpdatedBefore is strict and in milliseconds: one more makes the
	// shortest time inclusive.
	list, err := m.Instances.ListInstances(ctx, store.InstanceFilter{Provider: def.Provider.Name(), UpdatedBefore: now.Add(-shortest + time.Millisecond)})
	if err != nil {
		return rep, err
	}
	var mine []store.Instance
	for _, inst := range list {
		if inst.DefinitionID == def.ID && inst.ProviderSandboxID != "" {
			mine = append(mine, inst)
		}
	}
	if len(mine) == 0 {
		return rep, nil
	}
	// A random start (the manager is copied by value, so it keeps no
	// cursor) shares the limit among the instances across passes.
	start := rand.IntN(len(mine))

	var reporter sandbox.PauseReporter
	canReport := sandbox.ProviderAs(def.Provider, &reporter)
	decide := opts.Decide
	if decide == nil {
		decide = func(_ context.Context, st IdleState) (IdleAction, error) {
			return byUpdatedAt(now, pause, destroy, st), nil
		}
	}
	for i := 0; i < limit && i < len(mine); i++ {
		inst := mine[(start+i)%len(mine)]
		st := IdleState{Instance: inst, CanPause: canReport && pause > 0}
		if canReport {
			paused, err := reporter.Paused(ctx, inst.ProviderSandboxID)
			switch {
			case err == nil:
				st.Paused = paused
			case sandbox.CodeOf(err) == sandbox.NotFound:
				st.CanPause = false // gone: only a destroy (which clears the record) helps
			default:
				m.log().Warn("ensure: asking whether an idle sandbox is paused failed", "key", inst.Key, "err", err)
				rep.Failed++
				continue
			}
		}
		act, err := decide(ctx, st)
		if err != nil {
			m.log().Warn("ensure: deciding on an idle sandbox failed; keeping it", "key", inst.Key, "err", err)
			rep.Failed++
			continue
		}
		switch act {
		case IdlePause:
			if st.Paused || !st.CanPause {
				continue
			}
			done, err := m.pauseOne(ctx, def, inst)
			switch {
			case err != nil:
				m.log().Warn("ensure: pausing an idle sandbox failed", "key", inst.Key, "err", err)
				rep.Failed++
			case done:
				rep.Paused++
			}
		case IdleDestroy:
			done, hookErr, err := m.destroyIdle(ctx, def, inst, st.Paused, opts.BeforeDestroy)
			switch {
			case hookErr != nil:
				m.log().Warn("ensure: the hook before destroying an idle sandbox failed; keeping it", "key", inst.Key, "err", hookErr)
				rep.HookFailed++
			case err != nil:
				m.log().Warn("ensure: destroying an idle sandbox failed", "key", inst.Key, "err", err)
				rep.Failed++
			case done:
				rep.Destroyed++
			}
		}
	}
	return rep, nil
}

// byUpdatedAt is the decision without run knowledge: idle since the
// record's UpdatedAt.
func byUpdatedAt(now time.Time, pause, destroy time.Duration, st IdleState) IdleAction {
	idle := now.Sub(st.Instance.UpdatedAt)
	switch {
	case destroy > 0 && idle >= destroy:
		return IdleDestroy
	case pause > 0 && idle >= pause && st.CanPause && !st.Paused:
		return IdlePause
	}
	return IdleKeep
}

// lockUnused takes the key's lock without waiting and re-reads the record:
// ok is false when someone holds the lock or the record changed since inst
// was listed (it was used meanwhile).
func (m *Manager) lockUnused(ctx context.Context, inst store.Instance) (store.Lease, store.Instance, bool, error) {
	lease, ok, err := m.Locker.TryLock(ctx, "sandbox:"+inst.Key, 30*time.Second)
	if err != nil || !ok {
		return nil, store.Instance{}, false, err
	}
	cur, found, err := m.Instances.GetInstance(ctx, inst.Key)
	if err != nil || !found || !cur.UpdatedAt.Equal(inst.UpdatedAt) || cur.ProviderSandboxID != inst.ProviderSandboxID {
		release(lease)
		return nil, store.Instance{}, false, err
	}
	return lease, cur, true, nil
}

func (m *Manager) pauseOne(ctx context.Context, def *sandbox.Definition, inst store.Instance) (bool, error) {
	const op = "ensure.pause-idle"
	lease, cur, ok, err := m.lockUnused(ctx, inst)
	if err != nil || !ok {
		return false, err
	}
	defer release(lease)
	h, err := def.Provider.Resume(ctx, cur.ProviderSandboxID)
	if err != nil {
		return false, err
	}
	var p sandbox.Pauser
	if !sandbox.As(h, &p) {
		return false, sandbox.Errorf(sandbox.Unimplemented, op, inst.Key, "the %s provider reports pauses but its handle cannot pause", def.Provider.Name())
	}
	if err := p.Pause(ctx); err != nil {
		return false, sandbox.Wrap(sandbox.CodeOf(err), op, inst.Key, err)
	}
	return true, nil
}

// destroyIdle destroys inst's sandbox after the hook; the record stays
// without a sandbox id. hookErr is the hook's failure, which keeps the
// sandbox (paused again when it was paused).
func (m *Manager) destroyIdle(ctx context.Context, def *sandbox.Definition, inst store.Instance, paused bool, hook func(context.Context, store.Instance, sandbox.Handle) error) (done bool, hookErr, err error) {
	const op = "ensure.destroy-idle"
	lease, cur, ok, err := m.lockUnused(ctx, inst)
	if err != nil || !ok {
		return false, nil, err
	}
	defer release(lease)
	if hook != nil {
		h, err := def.Provider.Resume(ctx, cur.ProviderSandboxID)
		if err != nil && sandbox.CodeOf(err) != sandbox.NotFound {
			return false, nil, err
		}
		if err == nil {
			if herr := m.callHook(ctx, hook, cur, h); herr != nil {
				if paused {
					var p sandbox.Pauser
					if sandbox.As(h, &p) {
						if perr := p.Pause(ctx); perr != nil {
							m.log().Warn("ensure: pausing a kept idle sandbox again failed", "key", inst.Key, "err", perr)
						}
					}
				}
				return false, sandbox.Wrap(sandbox.FailedPrecondition, op, inst.Key, herr), nil
			}
		}
		// A sandbox that is gone has nothing to capture: its record is
		// cleared below like any other.
	}
	if err := def.Provider.Destroy(ctx, cur.ProviderSandboxID); err != nil && sandbox.CodeOf(err) != sandbox.NotFound {
		return false, nil, err
	}
	cur.ProviderSandboxID = ""
	if err := m.Instances.PutInstance(ctx, cur); err != nil {
		return false, nil, err
	}
	return true, nil, nil
}

// callHook calls the hook, turning a panic into an error so that a broken
// hook keeps the sandbox rather than ending the pass.
func (m *Manager) callHook(ctx context.Context, hook func(context.Context, store.Instance, sandbox.Handle) error, inst store.Instance, h sandbox.Handle) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = sandbox.Errorf(sandbox.Internal, "ensure.before-destroy", inst.Key, "panic: %v", p)
		}
	}()
	return hook(ctx, inst, h)
}
