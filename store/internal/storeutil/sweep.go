package storeutil

import (
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// Operation names of the blob sweep.
const (
	OpBeginSweep    = "checkpoints.begin_blob_sweep"
	OpEndSweep      = "checkpoints.end_blob_sweep"
	OpListCkThreads = "checkpoints.list_threads"
)

// SweepRow is the store's blob sweep state: the generation (odd while a
// sweep runs) and the running sweep's expiry.
type SweepRow struct {
	Gen     int64
	Expires time.Time
}

// Live reports whether a sweep holds the row at now.
func (r SweepRow) Live(now time.Time) bool {
	return r.Gen%2 == 1 && !r.Expires.IsZero() && MS(r.Expires) > MS(now)
}

// BeginSweep returns the row after a sweep begins at now for ttl, or
// ErrSweepConflict while another is live. An expired sweep is taken over:
// the generation moves on by two, so leases taken under it are refused.
func BeginSweep(row SweepRow, now time.Time, ttl time.Duration) (SweepRow, error) {
	if ttl <= 0 {
		return row, sandbox.Errorf(sandbox.InvalidArgument, OpBeginSweep, "", "the sweep's ttl must be positive, not %s", ttl)
	}
	if row.Live(now) {
		return row, Cond(sandbox.FailedPrecondition, store.ErrSweepConflict, OpBeginSweep, "",
			"another blob sweep is live until %s", row.Expires.UTC().Format(time.RFC3339))
	}
	gen := row.Gen + 1
	if row.Gen%2 == 1 {
		gen = row.Gen + 2
	}
	return SweepRow{Gen: gen, Expires: LeaseExpiry(now, ttl)}, nil
}

// EndSweep returns the row after sw ends, and whether sw was current.
func EndSweep(row SweepRow, sw store.BlobSweep) (SweepRow, bool) {
	if row.Gen != sw.Gen || row.Gen%2 != 1 {
		return row, false
	}
	return SweepRow{Gen: row.Gen + 1}, true
}

// CheckSweep refuses (ErrBlobSwept) an append under a lease acquired in
// another sweep generation than row's, or while the sweep it was acquired
// under is still live.
func CheckSweep(op, thread string, row SweepRow, w store.WriterLease, now time.Time) error {
	if row.Gen != w.SweepGen || row.Live(now) {
		return Cond(sandbox.FailedPrecondition, store.ErrBlobSwept, op, thread,
			"a blob sweep began since the writer lease was taken (generation %d, now %d): capture again", w.SweepGen, row.Gen)
	}
	return nil
}
