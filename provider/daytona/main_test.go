package daytona_test

import (
	"testing"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/daytona"
	"github.com/d10ffeed/corral/provider/daytona/daytonafake"
)

const testKey = "dtn-test-key-5b1c9e"

// newFake starts the Daytona fake on loopback; it is closed (every
// sandbox destroyed) when the test ends.
func newFake(t *testing.T) *daytonafake.Server {
	t.Helper()
	s, err := daytonafake.New(fakecloud.Options{BaseDir: t.TempDir(), Token: testKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// newProvider returns the provider over the fake; pauses between retries
// are recorded, not waited.
func newProvider(t *testing.T, s *daytonafake.Server, opts daytona.Options) (*daytona.Provider, *testutil.Sleeps) {
	t.Helper()
	sl := &testutil.Sleeps{}
	opts.APIURL = s.APIURL()
	if opts.APIKey == "" {
		opts.APIKey = testKey
	}
	if opts.Sleep == nil {
		opts.Sleep = sl.Sleep
	}
	if opts.Jitter == nil {
		opts.Jitter = func() float64 { return 0 }
	}
	p, err := daytona.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p, sl
}
