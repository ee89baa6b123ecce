package cloudflare_test

import (
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/cloudflare"
	"github.com/d10ffeed/corral/provider/cloudflare/cloudflarefake"
)

const testToken = "cf-bridge-test-token-3c9d"

// newFake starts the fake bridge on loopback; it is closed (every sandbox
// destroyed) when the test ends.
func newFake(t *testing.T) *cloudflarefake.Server {
	t.Helper()
	s, err := cloudflarefake.New(fakecloud.Options{BaseDir: t.TempDir(), Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// newProvider returns the provider over the fake; pauses between retries
// are recorded, not waited.
func newProvider(t *testing.T, s *cloudflarefake.Server, opts cloudflare.Options) (*cloudflare.Provider, *testutil.Sleeps) {
	t.Helper()
	sl := &testutil.Sleeps{}
	opts.URL = s.URL()
	if opts.Token == "" {
		opts.Token = testToken
	}
	if opts.Sleep == nil {
		opts.Sleep = sl.Sleep
	}
	if opts.Jitter == nil {
		opts.Jitter = func() float64 { return 0 }
	}
	if opts.KillGrace == 0 {
		opts.KillGrace = 200 * time.Millisecond
	}
	p, err := cloudflare.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p, sl
}
