package vercel_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/provider/vercel"
	"github.com/d10ffeed/corral/provider/vercel/vercelfake"
)

const testToken = "vcl-test-token-6a2f1e"

// newFake starts the Vercel fake on loopback; it is closed (every sandbox
// destroyed) when the test ends.
func newFake(t *testing.T) *vercelfake.Server {
	t.Helper()
	s, err := vercelfake.New(fakecloud.Options{BaseDir: t.TempDir(), Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
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

// newProvider returns the provider over the fake; pauses between retries
// are recorded, not waited.
func newProvider(t *testing.T, s *vercelfake.Server, opts vercel.Options) (*vercel.Provider, *sleeps) {
	t.Helper()
	sl := &sleeps{}
	opts.APIURL = s.APIURL()
	if opts.Token == "" {
		opts.Token = testToken
	}
	if opts.TeamID == "" {
		opts.TeamID = vercelfake.Team
	}
	if opts.ProjectID == "" {
		opts.ProjectID = vercelfake.Project
	}
	if opts.Sleep == nil {
		opts.Sleep = sl.sleep
	}
	if opts.Jitter == nil {
		opts.Jitter = func() float64 { return 0 }
	}
	p, err := vercel.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p, sl
}

func hangGuard(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
