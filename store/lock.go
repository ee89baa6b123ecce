package store

import (
	"context"
	"time"
)

// Locker gives per-name mutual exclusion across every process that shares
// the store. A lock is a lease with a time to live: the holder's lease
// renews itself in the background every ttl/3, and a holder that stops
// renewing (it crashed, or lost the database) loses the lock ttl after its
// last renewal.
//
// Expiry alone cannot stop a paused holder from acting after its lease ran
// out, so every acquisition also gets a fencing token (Lease.Token): a number
// that is strictly greater than every token issued before for the same name,
// by any process, and is never reused. Writers pass the token to whatever
// they protect, which refuses tokens lower than the highest it has seen.
type Locker interface {
	// Lock blocks until it holds name, then returns the lease. ttl is how
	// long the lease outlives its last renewal; it must be at least a
	// millisecond. When ctx ends first it returns an error with code Canceled
	// or DeadlineExceeded. ctx bounds the wait only: the lease lives until
	// Release, loss or the store's Close.
	Lock(ctx context.Context, name string, ttl time.Duration) (Lease, error)
	// TryLock takes name if nobody holds it and returns (lease, true, nil);
	// if someone does it returns (nil, false, nil) at once.
	TryLock(ctx context.Context, name string, ttl time.Duration) (Lease, bool, error)
}

// Lease is one holding of a lock. Its methods are safe for concurrent use.
type Lease interface {
	// Name is the lock's name.
	Name() string
	// Token is this acquisition's fencing token: strictly greater than the
	// token of every earlier acquisition of the same name.
	Token() int64
	// Lost is closed when the holder can no longer be sure it holds the lock:
	// a renewal found the lease taken or released, or no renewal succeeded
	// within ttl. It is also closed by Release (the holder no longer holds
	// the lock either way), so a goroutine waiting on it always ends.
	Lost() <-chan struct{}
	// Release stops the renewal and gives the lock up if this lease still
	// holds it. It never releases a later holder's lease, even after this one
	// expired. Calling it again is a no-op that returns nil.
	Release(ctx context.Context) error
}
