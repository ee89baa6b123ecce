package sprites_test

import (
	"net"
	"testing"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/sprites"
	"github.com/d10ffeed/corral/provider/sprites/spritesfake"
)

const testKey = "corral-org/1234/tok-5b1c9e/secret-d00d"

// freePort returns a loopback port nobody listens on.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// newFake starts the Sprites fake on loopback with a free HTTP port; it
// is closed (every Sprite destroyed) when the test ends.
func newFake(t *testing.T) *spritesfake.Server {
	t.Helper()
	s, err := spritesfake.New(spritesfake.Options{Options: fakecloud.Options{BaseDir: t.TempDir(), Token: testKey}, HTTPPort: freePort(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// newProvider returns the provider over the fake; pauses are recorded,
// not waited.
func newProvider(t *testing.T, s *spritesfake.Server, opts sprites.Options) (*sprites.Provider, *testutil.Sleeps) {
	t.Helper()
	sl := &testutil.Sleeps{}
	opts.APIURL = s.APIURL()
	if opts.APIKey == "" {
		opts.APIKey = testKey
	}
	if opts.HTTPPort == 0 {
		opts.HTTPPort = s.HTTPPort()
	}
	if opts.Sleep == nil {
		opts.Sleep = sl.Sleep
	}
	if opts.Jitter == nil {
		opts.Jitter = func() float64 { return 0 }
	}
	p, err := sprites.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p, sl
}
