package run

import (
	"context"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// Attach makes sure the run is driven and then streams its events after
// sequence number after (see Follow). If no live process drives the run,
// this one takes it over: it claims the run (lease and epoch bump), clears
// DetachedSince, replays the journal from byte 0 against the stored log and
// appends only the remainder. A terminal run is only replayed from the log:
// attaching never resurrects it.
//
// While another process holds the run's lease, Attach follows the log and
// keeps trying to take over, so a driver that died is replaced once its
// lease expires.
func (r *Runner) Attach(ctx context.Context, runID string, after int64, fn func(store.Event) error) error {
	return r.attach(ctx, runID, after, eachEvent(fn))
}

func (r *Runner) attach(ctx context.Context, runID string, after int64, fn func([]store.Event) error) error {
	if err := r.TakeOver(ctx, runID); err != nil {
		return err
	}
	actx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		t := time.NewTicker(r.opts.LeaseTTL / 4)
		defer t.Stop()
		for {
			select {
			case <-actx.Done():
				return
			case <-t.C:
			}
			if r.driving(runID) != nil {
				continue
			}
			if err := r.TakeOver(actx, runID); err != nil && actx.Err() == nil {
				r.log.Warn("run: taking over failed", "run", runID, "err", err)
			}
		}
	}()
	return r.follow(ctx, runID, after, fn)
}

// AttachBatched is Attach with the events handed over in the batches they
// come in (one store read, or one append of this process's driver), so a
// caller can flush its output once per batch. Each batch is non-empty.
func (r *Runner) AttachBatched(ctx context.Context, runID string, after int64, fn func([]store.Event) error) error {
	return r.attach(ctx, runID, after, fn)
}

// TakeOver starts driving the run in this process unless it is terminal or
// a live driver (here or elsewhere) holds it. It returns once the driver
// started; it does not wait for the remainder.
func (r *Runner) TakeOver(ctx context.Context, runID string) error {
	if r.driving(runID) != nil {
		return nil
	}
	rec, ok, err := r.store.GetRun(ctx, runID)
	if err != nil {
		return err
	}
	if !ok {
		return sandbox.Errorf(sandbox.NotFound, "run.attach", runID, "no such run")
	}
	if rec.Status.Terminal() {
		return nil
	}
	def, ok := r.defs[rec.DefinitionID]
	if !ok {
		return sandbox.Errorf(sandbox.FailedPrecondition, "run.attach", runID, "this process does not know the run's sandbox definition %q", rec.DefinitionID)
	}
	h, ok := r.harnesses[rec.Harness]
	if !ok {
		return sandbox.Errorf(sandbox.FailedPrecondition, "run.attach", runID, "this process does not know the run's harness %q", rec.Harness)
	}
	lease, got, err := r.store.TryLock(ctx, leaseName(runID), r.opts.LeaseTTL)
	if err != nil {
		return err
	}
	if !got {
		return nil // a live driver holds it; Follow tails the log
	}
	// Re-read under the lease: the run may have ended meanwhile.
	rec, ok, err = r.store.GetRun(ctx, runID)
	if err != nil || !ok || rec.Status.Terminal() {
		_ = lease.Release(context.WithoutCancel(ctx))
		return err
	}
	claimed, err := r.store.ClaimRun(ctx, runID, rec.DriverEpoch)
	if err != nil {
		_ = lease.Release(context.WithoutCancel(ctx))
		if sandbox.CodeOf(err) == sandbox.FailedPrecondition {
			return nil // claimed or ended by someone else just now
		}
		return err
	}
	epoch := claimed.DriverEpoch
	if !claimed.DetachedSince.IsZero() {
		if claimed, err = r.store.UpdateRun(ctx, runID, store.RunPatch{DetachedSince: store.Clear[time.Time](), IfEpoch: &epoch}); err != nil {
			_ = lease.Release(context.WithoutCancel(ctx))
			return err
		}
	}
	r.launch(r.newDriver(claimed, def, h, lease))
	if f := r.opts.OnTakeOver; f != nil {
		f(runID)
	}
	return nil
}

// Follow calls fn with every event of the run after sequence number after,
// in order, then with new events as they are appended, until the log is
// closed (the run ended) or ctx ends. Events appended by this process are
// delivered at once, from the driver's in-memory tail when it holds them
// (no store read: see tailState); those appended by another process are
// polled for.
func (r *Runner) Follow(ctx context.Context, runID string, after int64, fn func(store.Event) error) error {
	return r.follow(ctx, runID, after, eachEvent(fn))
}

// eachEvent hands fn a batch's events one by one.
func eachEvent(fn func(store.Event) error) func([]store.Event) error {
	return func(evs []store.Event) error {
		for _, e := range evs {
			if err := fn(e); err != nil {
				return err
			}
		}
		return nil
	}
}

// FollowBatched is Follow with the events handed over in the batches they
// come in (see AttachBatched). Each batch is non-empty.
func (r *Runner) FollowBatched(ctx context.Context, runID string, after int64, fn func([]store.Event) error) error {
	return r.follow(ctx, runID, after, fn)
}

func (r *Runner) follow(ctx context.Context, runID string, after int64, fn func([]store.Event) error) error {
	if after < 0 {
		return sandbox.Errorf(sandbox.InvalidArgument, "run.follow", runID, "negative offset %d", after)
	}
	if r.driving(runID) == nil { // a run driven here exists
		if _, ok, err := r.store.GetRun(ctx, runID); err != nil {
			return err
		} else if !ok {
			return sandbox.Errorf(sandbox.NotFound, "run.follow", runID, "no such run")
		}
	}
	const page = 1000
	for {
		var (
			wake   <-chan struct{}
			evs    []store.Event
			closed bool
			inMem  bool
		)
		d := r.driving(runID)
		if d != nil {
			wake, evs, closed, inMem = d.since(after, page)
		}
		if !inMem {
			// Closing happens after the last append: a log seen closed
			// before the read has nothing after what the read returns.
			var err error
			if closed, err = r.store.LogClosed(ctx, runID); err != nil {
				return err
			}
			if evs, err = r.store.ReadEvents(ctx, runID, after, page); err != nil {
				return err
			}
		}
		if len(evs) > 0 {
			if err := fn(evs); err != nil {
				return err
			}
			after = evs[len(evs)-1].Seq
		}
		if len(evs) == page {
			continue
		}
		if closed {
			return nil
		}
		if d != nil {
			select {
			case <-wake:
			case <-d.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		select {
		case <-time.After(r.opts.LogPollInterval):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Cancel asks for the run to end. The request is stored on the record, and
// whichever process drives the run acts on it: the agent is killed (or, on
// providers that cannot kill, its sandbox destroyed) and the run ends
// cancelled. When no live process drives the run, this one takes it over
// to do so. Cancelling a terminal run does nothing.
func (r *Runner) Cancel(ctx context.Context, runID string) (store.Run, error) {
	rec, ok, err := r.store.GetRun(ctx, runID)
	if err != nil {
		return store.Run{}, err
	}
	if !ok {
		return store.Run{}, sandbox.Errorf(sandbox.NotFound, "run.cancel", runID, "no such run")
	}
	if rec.Status.Terminal() {
		return rec, nil
	}
	if rec.CancelRequested.IsZero() {
		rec, err = r.store.UpdateRun(ctx, runID, store.RunPatch{CancelRequested: store.Set(r.opts.Now()), IfNotTerminal: true})
		if sandbox.CodeOf(err) == sandbox.FailedPrecondition {
			rec, _, err = r.store.GetRun(ctx, runID)
			return rec, err
		}
		if err != nil {
			return store.Run{}, err
		}
	}
	if d := r.driving(runID); d != nil {
		d.askCancel() // the request is stored: the driver here acts on it at once
		return rec, nil
	}
	return rec, r.TakeOver(ctx, runID)
}
