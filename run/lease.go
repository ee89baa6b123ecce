package run

import (
	"context"
	"errors"
	"time"

	"github.com/d10ffeed/corral/store"
)

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
