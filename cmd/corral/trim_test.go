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
// run is driven, and each minute while it stays idle.
func TestTrimWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		driving, launched, trims := 0, uint64(0), 0
		set := func(n int, l uint64) { mu.Lock(); driving, launched = n, l; mu.Unlock() }
		got := func() int { mu.Lock(); defer mu.Unlock(); return trims }
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go trimWhenIdle(ctx, func() (int, uint64) { mu.Lock(); defer mu.Unlock(); return driving, launched },
			func() { mu.Lock(); trims++; mu.Unlock() })

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
		time.Sleep(61 * time.Second)
		synctest.Wait()
		if n := got(); n != 3 {
			t.Fatalf("%d trims after a further idle minute, want 3", n)
		}
	})
}
