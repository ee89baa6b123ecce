package railway_test

import (
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/testutil"
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

// newProvider returns a provider pointed at f (workspace under the
// sandbox's $HOME, since the fake's sandboxes are host directories), with
// cloudhttp's pauses recorded instead of waited.
func newProvider(t *testing.T, f *railwayfake.Fake, opts railway.Options) (*railway.Provider, *testutil.Sleeps) {
	t.Helper()
	sl := &testutil.Sleeps{}
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
		opts.Sleep = sl.Sleep
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
