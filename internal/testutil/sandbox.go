package testutil

import (
	"context"
	"testing"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// Create makes a sandbox on p that is destroyed when the test ends; a
// failed Create fails the test, and so does a failed Destroy at the end.
func Create(tb testing.TB, p sandbox.Provider, opts sandbox.CreateOptions) sandbox.Handle {
	tb.Helper()
	h, err := p.Create(context.Background(), opts)
	if err != nil {
		tb.Fatalf("Create: %v", err)
	}
	DestroyAtEnd(tb, h)
	return h
}

// DestroyAtEnd destroys h when the test ends (bounded by a minute, a hang
// guard) and fails the test if Destroy fails.
func DestroyAtEnd(tb testing.TB, h sandbox.Handle) {
	tb.Helper()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := h.Destroy(ctx); err != nil {
			tb.Errorf("Destroy %s: %v", h.ID(), err)
		}
	})
}
