package upstashbox_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/provider/upstashbox"
	"github.com/d10ffeed/corral/provider/upstashbox/upstashboxfake"
	"github.com/d10ffeed/corral/sandbox"
)

const testKey = "box_test_key_8d41c07e2a"

// newFake starts the Upstash Box fake on loopback; it is closed (every
// box destroyed) when the test ends.
func newFake(t *testing.T) *upstashboxfake.Fake {
	t.Helper()
	f, err := upstashboxfake.New(upstashboxfake.Options{BaseDir: t.TempDir(), APIKey: testKey})
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

// newProvider returns the provider over the fake (the workspace learnt
// from the box, since the fake's boxes are host directories).
func newProvider(t *testing.T, f *upstashboxfake.Fake, opts upstashbox.Options) (*upstashbox.Provider, *sleeps) {
	t.Helper()
	sl := &sleeps{}
	if opts.APIKey == "" {
		opts.APIKey = testKey
	}
	opts.BaseURL, opts.DiscoverWorkdir = f.URL(), true
	if opts.PortURL == nil {
		opts.PortURL = f.PortURL
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
	p, err := upstashbox.New(opts)
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
