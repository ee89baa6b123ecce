package testutil

import (
	"context"
	"sync"
	"testing"
	"time"
)

// HangGuard returns a context that ends two minutes into the test: it
// bounds a case that would otherwise hang, and never decides a verdict.
func HangGuard(tb testing.TB) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	tb.Cleanup(cancel)
	return ctx
}

// Sleeps records the pauses a client asked for (a provider's Options.Sleep
// between retries) instead of waiting them. The zero value is ready.
type Sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

// Sleep records d and returns ctx's error at once.
func (s *Sleeps) Sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

// All returns the pauses recorded so far, in order.
func (s *Sleeps) All() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}
