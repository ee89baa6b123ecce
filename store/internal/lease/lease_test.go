package lease

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
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
	b := &fakeBackend{held: true}
	l := start(b, 90*time.Millisecond)
	if l.Name() != "n" || l.Token() != 7 {
		t.Fatalf("Name/Token = %q/%d", l.Name(), l.Token())
	}
	if closedWithin(l.Lost(), 400*time.Millisecond) {
		t.Fatal("Lost closed while renewals succeed")
	}
	if n := b.renews.Load(); n < 3 {
		t.Fatalf("%d renewals in 400ms at ttl 90ms, want about 13", n)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(l.Lost(), 0) {
		t.Fatal("Lost not closed after Release")
	}
	n := b.renews.Load()
	time.Sleep(100 * time.Millisecond)
	if b.renews.Load() != n {
		t.Fatal("renewal goes on after Release")
	}
	if err := l.Release(t.Context()); err != nil || b.releases.Load() != 1 {
		t.Fatalf("second Release = %v, backend releases %d", err, b.releases.Load())
	}
}

func TestLostWhenTaken(t *testing.T) {
	b := &fakeBackend{held: true}
	l := start(b, 60*time.Millisecond)
	b.set(false, nil, nil)
	if !closedWithin(l.Lost(), time.Second) {
		t.Fatal("Lost did not close when a renewal found the lease taken")
	}
}

// A renewal that keeps failing (the database is gone) loses the lease
// after the ttl, not before: transient failures are retried.
func TestLostAfterTTLWhenRenewalsFail(t *testing.T) {
	b := &fakeBackend{held: true}
	const ttl = 300 * time.Millisecond
	began := time.Now()
	l := start(b, ttl)
	b.set(true, errors.New("connection refused"), nil)
	if closedWithin(l.Lost(), ttl/2) {
		t.Fatal("Lost closed on the first failed renewal")
	}
	if !closedWithin(l.Lost(), 2*ttl) {
		t.Fatal("Lost did not close after the ttl without a renewal")
	}
	if d := time.Since(began); d < ttl {
		t.Fatalf("Lost closed %v after the start, before the ttl", d)
	}
	if n := b.renews.Load(); n < 3 {
		t.Fatalf("%d renewal attempts: failures must be retried", n)
	}
}

func TestTransientFailureRecovers(t *testing.T) {
	b := &fakeBackend{held: true}
	const ttl = 600 * time.Millisecond
	l := start(b, ttl)
	b.set(true, errors.New("blip"), nil)
	time.Sleep(ttl / 3)
	b.set(true, nil, nil)
	if closedWithin(l.Lost(), 3*ttl) {
		t.Fatal("a lease whose renewals recovered within the ttl was lost")
	}
	_ = l.Release(t.Context())
}

func TestReleaseErrorRetried(t *testing.T) {
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
}

func TestAbandon(t *testing.T) {
	b := &fakeBackend{held: true}
	l := start(b, 150*time.Millisecond)
	if !Abandon(l) {
		t.Fatal("Abandon refused a Lease")
	}
	if !closedWithin(l.Lost(), time.Second) {
		t.Fatal("an abandoned lease did not read lost after its ttl")
	}
	if n := b.renews.Load(); n != 0 {
		t.Fatalf("an abandoned lease renewed %d times", n)
	}
	var other store.Lease
	if Abandon(other) {
		t.Fatal("Abandon accepted a nil lease")
	}
}

func TestWait(t *testing.T) {
	// Polls an hour apart: only a Wake can end the wait in time.
	pollMin, pollMax = time.Hour, time.Hour
	defer func() { pollMin, pollMax = 2*time.Millisecond, 200*time.Millisecond }()
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
	for tries.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	w.Wake()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wake did not cut the wait short")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := Wait(ctx, "n", nil, func(context.Context) (store.Lease, bool, error) { return nil, false, nil })
	if sandbox.CodeOf(err) != sandbox.DeadlineExceeded {
		t.Fatalf("Wait past the deadline = %v", err)
	}
}
