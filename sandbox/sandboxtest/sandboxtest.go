// Package sandboxtest is the conformance suite every corral provider must
// pass: ours and anyone else's. A provider's own test calls Run with a
// Harness that says how to make sandboxes:
//
//	func TestConformance(t *testing.T) {
//		p, err := local.New(local.Options{BaseDir: t.TempDir()})
//		if err != nil {
//			t.Fatal(err)
//		}
//		sandboxtest.Run(t, sandboxtest.Harness{Provider: p})
//	}
//
// The suite is the specification. Every case that cannot apply to a
// provider skips with a reason derived from its capabilities, never from
// its name. Some cases run whatever the flags say: KillableProcesses is
// measured (a process tree with a backgrounded grandchild is killed and its
// heartbeat must stop), and a provider that claims it and fails, fails.
//
// The sandboxes must provide a POSIX sh and the common tools BusyBox has
// (cat, printf, sleep, dd, mktemp, ln, rm, pwd, mkdir, test).
package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// Harness tells the suite how to make sandboxes.
type Harness struct {
	// Provider is the provider under test.
	Provider sandbox.Provider
	// Options, when set, returns the options for each fresh sandbox.
	Options func(t *testing.T) sandbox.CreateOptions
	// Port is a port the sandbox may listen on that ConnectPort reaches
	// (for example one the provider publishes). Zero makes the suite pick a
	// free port on the host's loopback, which is right only for providers
	// that share the host's network.
	Port int
	// CaseTimeout bounds each case. Default 3 minutes: a loaded container
	// engine can take seconds per exec, and the bound only catches hangs.
	CaseTimeout time.Duration
}

// Run runs the whole suite as subtests of t.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.Provider == nil {
		t.Fatal("sandboxtest: Harness.Provider is nil")
	}
	if h.CaseTimeout <= 0 {
		h.CaseTimeout = 3 * time.Minute
	}
	s := &suite{h: h, caps: h.Provider.Capabilities()}
	cases := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"Capabilities", s.testCapabilities},
		{"FileRoundTrips", s.testFileRoundTrips},
		{"FileListing", s.testFileListing},
		{"FileMutations", s.testFileMutations},
		{"PathEscapes", s.testPathEscapes},
		{"Exec", s.testExec},
		{"ExecLargeOutput", s.testExecLargeOutput},
		{"ExecDeadline", s.testExecDeadline},
		{"Spawn", s.testSpawn},
		{"SpawnStdin", s.testSpawnStdin},
		{"KillMeasured", s.testKillMeasured},
		{"KillByContext", s.testKillByContext},
		{"OwnProcessTable", s.testOwnProcessTable},
		{"ResumeAndDestroy", s.testResumeAndDestroy},
		{"Fork", s.testFork},
		{"SnapshotRestore", s.testSnapshotRestore},
		{"Ports", s.testPorts},
		{"ConcurrentExec", s.testConcurrentExec},
	}
	for _, c := range cases {
		t.Run(c.name, c.fn)
	}
}

type suite struct {
	h    Harness
	caps sandbox.Capabilities
}

// ctx returns a context bounded by the case timeout.
func (s *suite) ctx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), s.h.CaseTimeout)
	t.Cleanup(cancel)
	return ctx
}

func (s *suite) options(t *testing.T) sandbox.CreateOptions {
	t.Helper()
	if s.h.Options != nil {
		return s.h.Options(t)
	}
	return sandbox.CreateOptions{}
}

// create makes a fresh sandbox that is destroyed when the test ends.
func (s *suite) create(t *testing.T, ctx context.Context) sandbox.Handle {
	t.Helper()
	return s.createWith(t, ctx, s.options(t))
}

func (s *suite) createWith(t *testing.T, ctx context.Context, opts sandbox.CreateOptions) sandbox.Handle {
	t.Helper()
	h, err := s.h.Provider.Create(ctx, opts)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	s.cleanup(t, h)
	return h
}

func (s *suite) cleanup(t *testing.T, h sandbox.Handle) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := h.Destroy(ctx); err != nil {
			t.Errorf("Destroy %s: %v", h.ID(), err)
		}
	})
}

// sh runs a shell script and fails the test on a transport error or a
// non-zero exit.
func sh(t *testing.T, ctx context.Context, h sandbox.Handle, script string) string {
	t.Helper()
	res, err := h.Exec(ctx, sandbox.Command{Shell: script})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d, stderr %q", script, res.ExitCode, res.Stderr)
	}
	return string(res.Stdout)
}

// wantCode fails unless err carries one of the codes.
func wantCode(t *testing.T, what string, err error, codes ...sandbox.Code) {
	t.Helper()
	got := sandbox.CodeOf(err)
	for _, c := range codes {
		if got == c {
			return
		}
	}
	t.Errorf("%s: got code %v (err %v), want one of %v", what, got, err, codes)
}

func writeFile(t *testing.T, ctx context.Context, h sandbox.Handle, name string, data []byte) {
	t.Helper()
	if err := h.FS().WriteFile(ctx, name, data); err != nil {
		t.Fatalf("WriteFile %s: %v", name, err)
	}
}

func readFile(t *testing.T, ctx context.Context, h sandbox.Handle, name string) []byte {
	t.Helper()
	b, err := h.FS().ReadFile(ctx, name)
	if err != nil {
		t.Fatalf("ReadFile %s: %v", name, err)
	}
	return b
}

func mustEqualBytes(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		if len(got) < 200 && len(want) < 200 {
			t.Fatalf("%s: got %q, want %q", what, got, want)
		}
		t.Fatalf("%s: got %d bytes, want %d bytes (contents differ)", what, len(got), len(want))
	}
}

func isUnimplemented(err error) bool {
	return sandbox.CodeOf(err) == sandbox.Unimplemented && errors.Is(err, sandbox.Unimplemented)
}

func (s *suite) skipUnless(t *testing.T, flag string) {
	t.Helper()
	if !s.caps.Has(flag) {
		t.Skip(fmt.Sprintf("provider %q does not claim %s (Capabilities.%s=false); the Capabilities case checked that the operation returns Unimplemented",
			s.h.Provider.Name(), flag, flag))
	}
}
