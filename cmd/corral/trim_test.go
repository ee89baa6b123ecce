package main

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestTrimWhenIdle: the daemon trims a second after its last run ends —
// also after a run that began and ended between two samples — not while a
// run is driven, and each minute while it stays idle; idle, it trims again
// when its resident size grew by 2 MiB since the last trim, not for less.
func TestTrimWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		driving, launched, trims := 0, uint64(0), 0
		rss := int64(15 << 20)
		set := func(n int, l uint64) { mu.Lock(); driving, launched = n, l; mu.Unlock() }
		got := func() int { mu.Lock(); defer mu.Unlock(); return trims }
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go trimWhenIdle(ctx, func() (int, uint64) { mu.Lock(); defer mu.Unlock(); return driving, launched },
			func() { mu.Lock(); trims++; mu.Unlock() },
			func() int64 { mu.Lock(); defer mu.Unlock(); return rss })
		grow := func(by int64) { mu.Lock(); rss += by; mu.Unlock() }

		time.Sleep(30 * time.Second)
		synctest.Wait()
		if n := got(); n != 0 {
			t.Fatalf("%d trims in 30 s idle from the start (the start-up trim is the caller's)", n)
		}
		set(1, 1) // a run is driven for ten seconds
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := got(); n != 0 {
			t.Fatalf("%d trims while a run is driven", n)
		}
		set(0, 1)
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if n := got(); n != 1 {
			t.Fatalf("%d trims 1.5 s after the run ended, want 1", n)
		}
		set(0, 2) // a run too short for any sample to see it driven
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if n := got(); n != 2 {
			t.Fatalf("%d trims after a run between samples, want 2", n)
		}
		grow(1 << 20) // idle, a little regrowth: no trim
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		if n := got(); n != 2 {
			t.Fatalf("%d trims after 1 MiB of regrowth, want 2", n)
		}
		grow(3 << 20) // idle, 4 MiB since the trim: trimmed again
		time.Sleep(1 * time.Second)
		synctest.Wait()
		if n := got(); n != 3 {
			t.Fatalf("%d trims after 4 MiB of regrowth, want 3", n)
		}
		time.Sleep(61 * time.Second)
		synctest.Wait()
		if n := got(); n != 4 {
			t.Fatalf("%d trims after a further idle minute, want 4", n)
		}
	})
}
