// Package lease is the holder's side of a lock lease, shared by every store
// implementation: the background renewal, the Lost signal, the idempotent
// Release and the polling wait of a blocking Lock. The storage side (who
// holds a name, its fencing token, when it expires) is the Backend each
// store provides.
package lease

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/internal/storeutil"
)

// Backend is the storage side of one acquired lease (one name, one token).
type Backend interface {
	// Renew extends the lease to ttl from now if this token still holds the
	// name. held is false when the name was released or taken since (a
	// definitive loss); an error is a failed attempt that may be retried.
	Renew(ctx context.Context) (held bool, err error)
	// Release gives the name up if this token still holds it; it never
	// touches a later token's lease.
	Release(ctx context.Context) error
}

// Config describes a lease that was just acquired.
type Config struct {
	Name    string        // the lock's name
	Token   int64         // the fencing token the acquisition got
	TTL     time.Duration // how long the lease outlives its last renewal
	Start   time.Time     // taken before the acquiring statement was sent
	Backend Backend       // the storage side
	Logger  *slog.Logger  // receives loss and renewal warnings; nil discards
	// OnEnd, if set, is called once when the lease is released.
	OnEnd func(*Lease)
}

// Lease implements store.Lease on top of a Backend.
type Lease struct {
	name    string
	token   int64
	ttl     time.Duration
	backend Backend
	log     *slog.Logger
	onEnd   func(*Lease)

	ctx       context.Context // cancelled on Release: ends a renewal in flight
	cancel    context.CancelFunc
	stop      chan struct{}
	stopOnce  sync.Once
	done      chan struct{}
	lost      chan struct{}
	lostOnce  sync.Once
	abandoned atomic.Bool

	relMu    sync.Mutex
	released bool
}

var _ store.Lease = (*Lease)(nil)

// Start returns the lease and starts its renewal (every TTL/3).
func Start(c Config) *Lease {
	ctx, cancel := context.WithCancel(context.Background())
	l := &Lease{
		name: c.Name, token: c.Token, ttl: c.TTL, backend: c.Backend,
		log: c.Logger, onEnd: c.OnEnd,
		ctx: ctx, cancel: cancel,
		stop: make(chan struct{}), done: make(chan struct{}), lost: make(chan struct{}),
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	go l.run(c.Start)
	return l
}

// Name returns the lock's name.
func (l *Lease) Name() string { return l.name }

// Token returns the fencing token.
func (l *Lease) Token() int64 { return l.token }

// Lost is closed when the lease is lost or released.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Release stops the renewal and releases the name if this token still
// holds it. A second call after a successful one is a no-op; after a failed
// one it tries the backend again.
func (l *Lease) Release(ctx context.Context) error {
	l.relMu.Lock()
	defer l.relMu.Unlock()
	if l.released {
		return nil
	}
	l.halt()
	// No renewal runs from here on, so the holder can no longer be sure of
	// the lock whatever the backend answers.
	l.markLost("")
	if err := l.backend.Release(ctx); err != nil {
		return sandbox.Wrap(sandbox.Unavailable, storeutil.OpRelease, l.name, err)
	}
	l.released = true
	if l.onEnd != nil {
		l.onEnd(l)
	}
	return nil
}

func (l *Lease) halt() {
	l.stopOnce.Do(func() {
		l.cancel()
		close(l.stop)
	})
	<-l.done
}

func (l *Lease) markLost(reason string) {
	l.lostOnce.Do(func() {
		if reason != "" {
			l.log.Warn("store: lock lease lost", "lock", l.name, "token", l.token, "reason", reason)
		}
		close(l.lost)
	})
}

func (l *Lease) run(start time.Time) {
	defer close(l.done)
	deadline := start.Add(l.ttl)
	interval := max(l.ttl/3, time.Millisecond/3)
	retry := max(l.ttl/10, time.Millisecond/10)
	expiry := time.NewTimer(time.Until(deadline))
	defer expiry.Stop()
	renew := time.NewTimer(interval)
	defer renew.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-expiry.C:
			l.markLost("no renewal succeeded within the ttl")
			return
		case <-renew.C:
			if l.abandoned.Load() {
				continue // only the expiry (or Release) can fire now
			}
			began := time.Now()
			ctx, cancel := context.WithDeadline(l.ctx, deadline)
			held, err := l.backend.Renew(ctx)
			cancel()
			switch {
			case err == nil && held:
				deadline = began.Add(l.ttl)
				expiry.Reset(time.Until(deadline))
				renew.Reset(interval)
			case err == nil:
				l.markLost("the lease was released or taken by another holder")
				return
			default:
				select {
				case <-l.stop:
					return
				default:
				}
				l.log.Warn("store: renewing a lock lease failed; retrying", "lock", l.name, "token", l.token, "error", err)
				renew.Reset(retry)
			}
		}
	}
}

// Abandon stops renewing l without releasing it, as if its holder had died.
// It is for tests (the conformance suite uses it to expire a lease in
// process). It reports false when l is not a lease of this package.
func Abandon(l store.Lease) bool {
	ll, ok := l.(*Lease)
	if ok {
		ll.abandoned.Store(true)
	}
	return ok
}

// Waker wakes in-process waiters when a lease of the same store is
// released, so they need not wait for their next poll.
type Waker struct {
	mu sync.Mutex
	ch chan struct{}
}

// C returns a channel closed by the next Wake.
func (w *Waker) C() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

// Wake wakes every current waiter.
func (w *Waker) Wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}

// The poll interval of Wait: it starts at pollMin and doubles up to
// pollMax (variables so that a test can stretch them).
var pollMin, pollMax = 2 * time.Millisecond, 200 * time.Millisecond

// Wait polls try until it acquires the lock or ctx ends. The poll interval
// grows from 2ms to 200ms with jitter; a Wake cuts a wait short.
func Wait(ctx context.Context, name string, w *Waker, try func(context.Context) (store.Lease, bool, error)) (store.Lease, error) {
	delay := pollMin
	for {
		var wake <-chan struct{}
		if w != nil {
			wake = w.C() // before the try, so a release during it is not missed
		}
		l, ok, err := try(ctx)
		if err != nil {
			return nil, err
		}
		if ok {
			return l, nil
		}
		d := delay/2 + rand.N(delay/2+1)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, sandbox.Wrap(sandbox.Canceled, storeutil.OpLock, name, ctx.Err())
		case <-wake:
			t.Stop()
		case <-t.C:
		}
		delay = min(delay*2, pollMax)
	}
}

// Registry tracks a store's live leases so Close can release them.
type Registry struct {
	mu     sync.Mutex
	leases map[*Lease]struct{}
	Waker  Waker // woken whenever a lease of the registry is released
}

// Add records l.
func (r *Registry) Add(l *Lease) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leases == nil {
		r.leases = make(map[*Lease]struct{})
	}
	r.leases[l] = struct{}{}
}

// Remove forgets l and wakes waiters; it is a lease's OnEnd.
func (r *Registry) Remove(l *Lease) {
	r.mu.Lock()
	delete(r.leases, l)
	r.mu.Unlock()
	r.Waker.Wake()
}

// ReleaseAll releases every live lease, best effort, within timeout.
func (r *Registry) ReleaseAll(timeout time.Duration) {
	r.mu.Lock()
	leases := make([]*Lease, 0, len(r.leases))
	for l := range r.leases {
		leases = append(leases, l)
	}
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, l := range leases {
		if err := l.Release(ctx); err != nil {
			l.log.Warn("store: releasing a lock lease at close failed; it expires after its ttl",
				"lock", l.name, "token", l.token, "error", err)
		}
	}
}
