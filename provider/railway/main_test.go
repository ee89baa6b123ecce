package railway_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/provider/railway"
	"github.com/d10ffeed/corral/provider/railway/railwayfake"
)

// testToken is the fake's credential.
const testToken = "rw-test-token-4f9c"

// newFake starts a Railway fake closed by the test's cleanup.
func newFake(t *testing.T) *railwayfake.Fake {
	t.Helper()
	f, err := railwayfake.New(railwayfake.Options{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

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

// newProvider returns a provider pointed at f (workspace under the
// sandbox's $HOME, since the fake's sandboxes are host directories), with
// cloudhttp's pauses recorded instead of waited.
func newProvider(t *testing.T, f *railwayfake.Fake, opts railway.Options) (*railway.Provider, *sleeps) {
	t.Helper()
	sl := &sleeps{}
	opts.Endpoint = f.GraphQLURL()
	opts.ExecEndpoint = f.ExecWSURL()
	if opts.Token == "" {
		opts.Token = testToken
	}
	if opts.EnvironmentID == "" {
		opts.EnvironmentID = f.EnvironmentID()
	}
	if opts.Workdir == "" {
		opts.Workdir = "~/workspace"
	}
	if opts.Sleep == nil {
		opts.Sleep = sl.sleep
	}
	if opts.Jitter == nil {
		opts.Jitter = func() float64 { return 0.5 }
	}
	if opts.KillGrace == 0 {
		opts.KillGrace = 200 * time.Millisecond // the default is Railway's 2 s; the suites need no more
	}
	p, err := railway.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p, sl
}

// hangGuard is a context that ends the test's calls if they hang (not a
// verdict).
func hangGuard(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
