package refcloud_test

import (
	"testing"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/internal/refcloud"
	"github.com/d10ffeed/corral/provider/internal/refcloud/fake"
)

const testToken = "refcloud-test-token-7f3a"

// newFake starts the reference backend on loopback; it is closed (every
// sandbox destroyed) when the test ends.
func newFake(t *testing.T, kill fakecloud.KillMode) *fakecloud.Server {
	t.Helper()
	s, err := fake.New(fakecloud.Options{BaseDir: t.TempDir(), Token: testToken, Kill: kill})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// newProvider returns the reference provider over the fake. Pauses
// between retries are recorded, not waited (jitter 0).
func newProvider(t *testing.T, s *fakecloud.Server, opts refcloud.Options) (*refcloud.Provider, *testutil.Sleeps) {
	t.Helper()
	sl := &testutil.Sleeps{}
	opts.BaseURL, opts.Token = s.URL(), testToken
	if opts.Sleep == nil {
		opts.Sleep = sl.Sleep
	}
	if opts.Jitter == nil {
		opts.Jitter = func() float64 { return 0 }
	}
	p, err := refcloud.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p, sl
}
