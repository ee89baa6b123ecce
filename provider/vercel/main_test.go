package vercel_test

import (
	"testing"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
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

// newProvider returns the provider over the fake; pauses between retries
// are recorded, not waited.
func newProvider(t *testing.T, s *vercelfake.Server, opts vercel.Options) (*vercel.Provider, *testutil.Sleeps) {
	t.Helper()
	sl := &testutil.Sleeps{}
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
		opts.Sleep = sl.Sleep
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
