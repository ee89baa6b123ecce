package e2b_test

import (
	"context"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/testutil"
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

// newProvider returns the provider over the fake: the API and envd at
// the fake's URL. Pauses between retries are recorded, not waited.
func newProvider(t *testing.T, f *e2bfake.Fake, opts e2b.Options) (*e2b.Provider, *testutil.Sleeps) {
	t.Helper()
	sl := &testutil.Sleeps{}
	if opts.APIKey == "" {
		opts.APIKey = testKey
	}
	opts.APIURL, opts.SandboxURL, opts.Domain = f.URL(), f.URL(), f.Domain()
	if opts.PortURL == nil {
		opts.PortURL = func(id, _ string, port int) string { return f.PortURL(id, port) }
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
	p, err := e2b.New(opts)
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
