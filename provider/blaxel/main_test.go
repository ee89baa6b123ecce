package blaxel_test

import (
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/blaxel"
	"github.com/d10ffeed/corral/provider/blaxel/blaxelfake"
)

const testKey = "bl-test-key-5c1e0a"

// newFake starts the Blaxel fake on loopback; it is closed (every sandbox
// destroyed) when the test ends.
func newFake(t *testing.T) *blaxelfake.Server {
	t.Helper()
	s, err := blaxelfake.New(fakecloud.Options{BaseDir: t.TempDir(), Token: testKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// newProvider returns the provider over the fake (workspace ~/workspace:
// the fake's sandboxes are host directories); pauses are recorded, not
// waited.
func newProvider(t *testing.T, s *blaxelfake.Server, opts blaxel.Options) (*blaxel.Provider, *testutil.Sleeps) {
	t.Helper()
	sl := &testutil.Sleeps{}
	opts.APIURL = s.APIURL()
	if opts.APIKey == "" {
		opts.APIKey = testKey
	}
	if opts.Workspace == "" {
		opts.Workspace = blaxelfake.Workspace
	}
	if opts.Workdir == "" {
		opts.Workdir = "~/workspace"
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
	p, err := blaxel.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p, sl
}
