package lease

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// fakeBackend answers renewals from a script.
type fakeBackend struct {
	mu       sync.Mutex
	held     bool
	renewErr error
	renews   atomic.Int32
	releases atomic.Int32
	relErr   error
}

func (f *fakeBackend) Renew(context.Context) (bool, error) {
	f.renews.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held, f.renewErr
}

func (f *fakeBackend) Release(context.Context) error {
	f.releases.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.relErr
}

func (f *fakeBackend) set(held bool, renewErr, relErr error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held, f.renewErr, f.relErr = held, renewErr, relErr
}

func start(b Backend, ttl time.Duration) *Lease {
	return Start(Config{Name: "n", Token: 7, TTL: ttl, Start: time.Now(), Backend: b})
}

// The tests run in synctest bubbles: time is the bubble's fake clock,
// which moves only when every goroutine in the bubble is blocked, so a
// renewal is never late however loaded the machine is, and every
// verdict is about the lease's logic, not the scheduler.

// closedWithin reports whether ch closes within d of the bubble's clock.
func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	default:
	}
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

func TestRenewsUntilRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{held: true}
		l := start(b, 90*time.Millisecond)
		if l.Name() != "n" || l.Token() != 7 {
			t.Fatalf("Name/Token = %q/%d", l.Name(), l.Token())
		}
		if closedWithin(l.Lost(), 400*time.Millisecond) {
			t.Fatal("Lost closed while renewals succeed")
		}
		// One renewal every ttl/3 = 30ms: at 30, 60, …, 390ms.
		if n := b.renews.Load(); n != 13 {
			t.Fatalf("%d renewals in 400ms at ttl 90ms, want 13", n)
		}
		if err := l.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if !closedWithin(l.Lost(), 0) {
			t.Fatal("Lost not closed after Release")
		}
		n := b.renews.Load()
		time.Sleep(time.Hour)
		if b.renews.Load() != n {
			t.Fatal("renewal goes on after Release")
		}
		if err := l.Release(t.Context()); err != nil || b.releases.Load() != 1 {
			t.Fatalf("second Release = %v, backend releases %d", err, b.releases.Load())
		}
	})
}

// A renewal that is merely late (the store answers slowly) keeps the
// lease as long as it succeeds within the ttl.
func TestSlowRenewalKeepsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Each renewal takes 25ms and the next starts 30ms after it ends:
		// it ends 80ms after the previous one began, within the 90ms ttl.
		b := &slowBackend{delay: 25 * time.Millisecond}
		l := start(b, 90*time.Millisecond)
		if closedWithin(l.Lost(), time.Second) {
			t.Fatal("Lost closed while slow renewals still succeed within the ttl")
		}
		if n := b.renews.Load(); n < 10 {
			t.Fatalf("%d renewals in 1s", n)
		}
		_ = l.Release(t.Context())
	})
}

// slowBackend answers every renewal with held after delay (or when the
// renewal's context ends).
type slowBackend struct {
	delay  time.Duration
	renews atomic.Int32
}

func (s *slowBackend) Renew(ctx context.Context) (bool, error) {
	s.renews.Add(1)
	select {
	case <-time.After(s.delay):
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

func (s *slowBackend) Release(context.Context) error { return nil }

func TestLostWhenTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{held: true}
		l := start(b, 60*time.Millisecond)
		b.set(false, nil, nil)
		// The first renewal (at ttl/3) finds the lease taken.
		if !closedWithin(l.Lost(), 20*time.Millisecond+1) {
			t.Fatal("Lost did not close when a renewal found the lease taken")
		}
	})
}

// A renewal that keeps failing (the database is gone) loses the lease
// after the ttl, not before: transient failures are retried.
func TestLostAfterTTLWhenRenewalsFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{held: true}
		const ttl = 300 * time.Millisecond
		began := time.Now()
		l := start(b, ttl)
		b.set(true, errors.New("connection refused"), nil)
		if closedWithin(l.Lost(), ttl-time.Millisecond) {
			t.Fatalf("Lost closed %v after the start, before the ttl", time.Since(began))
		}
		if !closedWithin(l.Lost(), time.Second) {
			t.Fatal("Lost did not close after the ttl without a renewal")
		}
		if d := time.Since(began); d != ttl {
			t.Fatalf("Lost closed %v after the start, want exactly the ttl %v", d, ttl)
		}
		// First attempt at ttl/3 = 100ms, then every ttl/10 = 30ms.
		if n := b.renews.Load(); n < 7 {
			t.Fatalf("%d renewal attempts: failures must be retried", n)
		}
	})
}

func TestTransientFailureRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{held: true}
		const ttl = 600 * time.Millisecond
		l := start(b, ttl)
		b.set(true, errors.New("blip"), nil)
		time.Sleep(ttl / 3 * 2) // the first attempts fail
		b.set(true, nil, nil)
		if closedWithin(l.Lost(), 10*ttl) {
			t.Fatal("a lease whose renewals recovered within the ttl was lost")
		}
		_ = l.Release(t.Context())
	})
}

func TestReleaseErrorRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{held: true, relErr: errors.New("down")}
		l := start(b, time.Minute)
		err := l.Release(t.Context())
		if sandbox.CodeOf(err) != sandbox.Unavailable {
			t.Fatalf("Release with a failing backend = %v, want Unavailable", err)
		}
		if !closedWithin(l.Lost(), 0) {
			t.Fatal("Lost not closed after a Release that stopped the renewal")
		}
		b.set(true, nil, nil)
		if err := l.Release(t.Context()); err != nil || b.releases.Load() != 2 {
			t.Fatalf("retried Release = %v, backend releases %d", err, b.releases.Load())
		}
	})
}

func TestAbandon(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &fakeBackend{held: true}
		const ttl = 150 * time.Millisecond
		began := time.Now()
		l := start(b, ttl)
		if !Abandon(l) {
			t.Fatal("Abandon refused a Lease")
		}
		if !closedWithin(l.Lost(), time.Hour) {
			t.Fatal("an abandoned lease did not read lost after its ttl")
		}
		if d := time.Since(began); d != ttl {
			t.Fatalf("an abandoned lease read lost after %v, want its ttl %v", d, ttl)
		}
		if n := b.renews.Load(); n != 0 {
			t.Fatalf("an abandoned lease renewed %d times", n)
		}
		var other store.Lease
		if Abandon(other) {
			t.Fatal("Abandon accepted a nil lease")
		}
	})
}

func TestWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Polls grow to 200ms; a Wake ends the wait at once, with no
		// time passing.
		var w Waker
		var tries atomic.Int32
		done := make(chan error, 1)
		go func() {
			_, err := Wait(t.Context(), "n", &w, func(context.Context) (store.Lease, bool, error) {
				if tries.Add(1) == 1 {
					return nil, false, nil
				}
				return &Lease{}, true, nil
			})
			done <- err
		}()
		synctest.Wait() // Wait sleeps after its first try
		began := time.Now()
		w.Wake()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if d := time.Since(began); d != 0 || tries.Load() != 2 {
			t.Fatalf("after Wake: %d tries, %v passed; want 2 tries at once", tries.Load(), d)
		}

		// Without a waker the polls back off: 2ms doubling to 200ms, each
		// between half and all of its step.
		var at []time.Duration
		began = time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		_, err := Wait(ctx, "n", nil, func(context.Context) (store.Lease, bool, error) {
			at = append(at, time.Since(began))
			return nil, false, nil
		})
		if sandbox.CodeOf(err) != sandbox.DeadlineExceeded {
			t.Fatalf("Wait past the deadline = %v", err)
		}
		if d := time.Since(began); d != 2*time.Second {
			t.Errorf("Wait returned %v after the start, want at its 2s deadline", d)
		}
		step := pollMin
		for i := 1; i < len(at); i++ {
			if gap := at[i] - at[i-1]; gap < step/2 || gap > step {
				t.Errorf("poll %d came %v after the previous, want within [%v, %v]", i, gap, step/2, step)
			}
			step = min(2*step, pollMax)
		}
		t.Logf("%d polls in 2s, the last %v apart", len(at), at[len(at)-1]-at[len(at)-2])
	})
}
