package e2b_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/provider/e2b"
	"github.com/d10ffeed/corral/provider/e2b/e2bfake"
	"github.com/d10ffeed/corral/sandbox"
)

const testKey = "e2b_test_key_5f2c9a0b1d"

// newFake starts the E2B fake on loopback; it is closed (every sandbox
// destroyed) when the test ends.
func newFake(t *testing.T) *e2bfake.Fake {
	t.Helper()
	f, err := e2bfake.New(e2bfake.Options{BaseDir: t.TempDir(), APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// sleeps records the pauses cloudhttp asked for instead of waiting them.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// newProvider returns the provider over the fake: the API and envd at
// the fake's URL. Pauses between retries are recorded, not waited.
func newProvider(t *testing.T, f *e2bfake.Fake, opts e2b.Options) (*e2b.Provider, *sleeps) {
	t.Helper()
	sl := &sleeps{}
	if opts.APIKey == "" {
		opts.APIKey = testKey
	}
	opts.APIURL, opts.SandboxURL, opts.Domain = f.URL(), f.URL(), f.Domain()
	if opts.PortURL == nil {
		opts.PortURL = func(id, _ string, port int) string { return f.PortURL(id, port) }
	}
	if opts.Sleep == nil {
		opts.Sleep = sl.sleep
	}
	if opts.Jitter == nil {
		opts.Jitter = func() float64 { return 0 }
	}
	if opts.KillGrace == 0 {
		opts.KillGrace = 500 * time.Millisecond
	}
	p, err := e2b.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p, sl
}

// hangGuard bounds a case; it never decides a verdict.
func hangGuard(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func create(t *testing.T, ctx context.Context, p sandbox.Provider, opts sandbox.CreateOptions) sandbox.Handle {
	t.Helper()
	h, err := p.Create(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	return h
}
