package sbx_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/d10ffeed/corral/provider/sbx"
	"github.com/d10ffeed/corral/provider/sbx/sbxfake"
)

// fakeBin is the fake sbx program, built once for the package's tests.
var fakeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sbxfake-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	fakeBin, err = sbxfake.Build(ctx, dir)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fake is one fake sbx machine: its state directory.
type fake struct{ state string }

func newFake(t *testing.T) *fake {
	t.Helper()
	return &fake{state: t.TempDir()}
}

// newProvider returns the provider driving the fake.
func newProvider(t *testing.T, f *fake, opts sbx.Options) *sbx.Provider {
	t.Helper()
	opts.Binary = fakeBin
	opts.Env = append(opts.Env, sbxfake.StateEnv+"="+f.state)
	if opts.StateDir == "" {
		opts.StateDir = filepath.Join(t.TempDir(), "sbx-state")
	}
	if opts.KillGrace == 0 {
		opts.KillGrace = 300 * time.Millisecond
	}
	p, err := sbx.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
