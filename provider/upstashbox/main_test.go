package upstashbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/testutil"
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

// newProvider returns the provider over the fake (the workspace learnt
// from the box, since the fake's boxes are host directories).
func newProvider(t *testing.T, f *upstashboxfake.Fake, opts upstashbox.Options) (*upstashbox.Provider, *testutil.Sleeps) {
	t.Helper()
	sl := &testutil.Sleeps{}
	if opts.APIKey == "" {
		opts.APIKey = testKey
	}
	opts.BaseURL, opts.DiscoverWorkdir = f.URL(), true
	if opts.PortURL == nil {
		opts.PortURL = f.PortURL
	}
	if opts.Sleep == nil {
		opts.Sleep = sl.Sleep
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

func create(t *testing.T, ctx context.Context, p sandbox.Provider, opts sandbox.CreateOptions) sandbox.Handle {
	t.Helper()
	h, err := p.Create(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	return h
}
