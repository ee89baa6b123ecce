package store

import "time"

// Store bundles the contracts that one database provides. The event log
// and the run records must live in the same database: an append is fenced by
// the run's DriverEpoch in the same transaction. The checkpoints live there
// too (a fork checks the destination's runs in its transaction); the blobs
// may live there or in a BlobStore of their own (store/blobstore).
type Store interface {
	InstanceStore
	Locker
	RunStore
	EventLog
	Forgetter
	CheckpointStore
	BlobStore
	// Close releases the leases this store still holds (best effort), stops
	// their renewal and closes the connections. The store is unusable after.
	Close() error
}

// Millis returns t truncated to the millisecond, in UTC: the form in which
// every store keeps and returns times. The zero time stays zero.
func Millis(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}
