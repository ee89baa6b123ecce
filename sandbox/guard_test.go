package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

var allCaps = sandbox.Capabilities{FS: true, Exec: true, Env: true, Ports: true, Snapshots: true, Fork: true, KillableProcesses: true}

// guarded returns a fake with caps, guarded, and a handle of it.
func guarded(t *testing.T, caps sandbox.Capabilities) (*fakeProvider, sandbox.Provider, sandbox.Handle) {
	t.Helper()
	f := newFake(caps)
	g := sandbox.Guard(f, sandbox.GuardOptions{})
	h, err := g.Create(context.Background(), sandbox.CreateOptions{ID: "sb-1"})
	if err != nil {
		t.Fatal(err)
	}
	return f, g, h
}

func wantCode(t *testing.T, what string, err error, code sandbox.Code) {
	t.Helper()
	if got := sandbox.CodeOf(err); got != code {
		t.Errorf("%s: code %v (%v), want %v", what, got, err, code)
	}
}

// TestGuardRefusesBeforeProvider tries every chore the guard does on a
// fake that does none of them: each is refused with its code and the fake
// records that it was never called.
func TestGuardRefusesBeforeProvider(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	bg := context.Background()
	cases := []struct {
		name string
		caps sandbox.Capabilities
		call func(p sandbox.Provider, h sandbox.Handle) error
		op   string // the fake's call that must not happen
		code sandbox.Code
	}{
		{"exec without command", allCaps, func(_ sandbox.Provider, h sandbox.Handle) error {
			_, err := h.Exec(bg, sandbox.Command{})
			return err
		}, "exec", sandbox.InvalidArgument},
		{"exec with Args and Shell", allCaps, func(_ sandbox.Provider, h sandbox.Handle) error {
			_, err := h.Exec(bg, sandbox.Command{Args: []string{"true"}, Shell: "true"})
			return err
		}, "exec", sandbox.InvalidArgument},
		{"exec with empty program", allCaps, func(_ sandbox.Provider, h sandbox.Handle) error {
			_, err := h.Exec(bg, sandbox.Command{Args: []string{""}})
			return err
		}, "exec", sandbox.InvalidArgument},
		{"exec with env name A=B", allCaps, func(_ sandbox.Provider, h sandbox.Handle) error {
			_, err := h.Exec(bg, sandbox.Command{Args: []string{"true"}, Env: map[string]string{"A=B": "x"}})
			return err
		}, "exec", sandbox.InvalidArgument},
		{"exec with Dir outside the workspace", allCaps, func(_ sandbox.Provider, h sandbox.Handle) error {
			_, err := h.Exec(bg, sandbox.Command{Args: []string{"true"}, Dir: "../etc"})
			return err
		}, "exec", sandbox.InvalidArgument},
		{"exec on an ended context", allCaps, func(_ sandbox.Provider, h sandbox.Handle) error {
			_, err := h.Exec(cancelled, sandbox.Command{Args: []string{"true"}})
			return err
		}, "exec", sandbox.Canceled},
		{"spawn with NUL in env name", allCaps, func(_ sandbox.Provider, h sandbox.Handle) error {
			_, err := h.Spawn(bg, sandbox.Command{Shell: "sleep 1", Env: map[string]string{"A\x00": "x"}})
			return err
		}, "spawn", sandbox.InvalidArgument},
		{"spawn with Stdin", allCaps, func(_ sandbox.Provider, h sandbox.Handle) error {
			_, err := h.Spawn(bg, sandbox.Command{Shell: "cat", Stdin: strings.NewReader("x")})
			return err
		}, "spawn", sandbox.InvalidArgument},
		{"spawn on an ended context", allCaps, func(_ sandbox.Provider, h sandbox.Handle) error {
			_, err := h.Spawn(cancelled, sandbox.Command{Shell: "true"})
			return err
		}, "spawn", sandbox.Canceled},
		{"set-env with empty name", allCaps, func(_ sandbox.Provider, h sandbox.Handle) error {
			return h.SetEnv(bg, map[string]string{"": "x"})
		}, "set-env", sandbox.InvalidArgument},
		{"set-env with A=B", allCaps, func(_ sandbox.Provider, h sandbox.Handle) error {
			return h.SetEnv(bg, map[string]string{"OK": "1", "A=B": "x"})
		}, "set-env", sandbox.InvalidArgument},
		{"snapshot without the capability", sandbox.Capabilities{FS: true, Exec: true}, func(_ sandbox.Provider, h sandbox.Handle) error {
			_, err := h.Snapshot(bg, "l")
			return err
		}, "snapshot", sandbox.Unimplemented},
		{"fork without the capability", sandbox.Capabilities{FS: true, Exec: true}, func(_ sandbox.Provider, h sandbox.Handle) error {
			_, err := h.Fork(bg)
			return err
		}, "fork", sandbox.Unimplemented},
		{"connect-port without the capability", sandbox.Capabilities{FS: true, Exec: true}, func(_ sandbox.Provider, h sandbox.Handle) error {
			_, err := h.ConnectPort(bg, 8080)
			return err
		}, "connect-port", sandbox.Unimplemented},
		{"connect-port 0", allCaps, func(_ sandbox.Provider, h sandbox.Handle) error {
			_, err := h.ConnectPort(bg, 0)
			return err
		}, "connect-port", sandbox.InvalidArgument},
		{"connect-port 65536", allCaps, func(_ sandbox.Provider, h sandbox.Handle) error {
			_, err := h.ConnectPort(bg, 65536)
			return err
		}, "connect-port", sandbox.InvalidArgument},
		{"restore-snapshot without the capability", sandbox.Capabilities{FS: true, Exec: true}, func(p sandbox.Provider, _ sandbox.Handle) error {
			_, err := p.RestoreSnapshot(bg, "snap-1", sandbox.CreateOptions{})
			return err
		}, "restore-snapshot", sandbox.Unimplemented},
		{"restore-snapshot with env name A=B", allCaps, func(p sandbox.Provider, _ sandbox.Handle) error {
			_, err := p.RestoreSnapshot(bg, "snap-1", sandbox.CreateOptions{Env: map[string]string{"A=B": "x"}})
			return err
		}, "restore-snapshot", sandbox.InvalidArgument},
		{"delete-snapshot without the capability", sandbox.Capabilities{FS: true, Exec: true}, func(p sandbox.Provider, _ sandbox.Handle) error {
			return p.DeleteSnapshot(bg, "snap-1")
		}, "delete-snapshot", sandbox.Unimplemented},
		{"resume on an ended context", allCaps, func(p sandbox.Provider, _ sandbox.Handle) error {
			_, err := p.Resume(cancelled, "sb-1")
			return err
		}, "resume", sandbox.Canceled},
	}
	refused := 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, g, h := guarded(t, tc.caps)
			err := tc.call(g, h)
			if err == nil {
				t.Fatalf("accepted; want %v", tc.code)
			}
			wantCode(t, tc.name, err, tc.code)
			if f.rec.called(tc.op) {
				t.Errorf("the provider's %s was called; the guard must refuse first", tc.op)
			} else {
				refused++
			}
			if tc.code == sandbox.Unimplemented {
				var uc *sandbox.UnsupportedCapabilityError
				if !errors.As(err, &uc) || uc.Provider != "fake" {
					t.Errorf("%v is not an UnsupportedCapabilityError of provider fake", err)
				}
				if !strings.HasPrefix(err.Error(), "fake."+tc.op+" ") {
					t.Errorf("message %q does not start with the operation fake.%s", err, tc.op)
				}
			}
		})
	}
	// Create is refused before the provider too (a bad env name).
	f := newFake(allCaps)
	_, err := sandbox.Guard(f, sandbox.GuardOptions{}).Create(bg, sandbox.CreateOptions{Env: map[string]string{"A=B": "x"}})
	wantCode(t, "create with env name A=B", err, sandbox.InvalidArgument)
	if f.rec.count() != 0 {
		t.Errorf("create with a bad env name reached the provider: %v", f.rec.calls)
	} else {
		refused++
	}
	t.Logf("refused before the provider: %d of %d calls", refused, len(cases)+1)
}

// TestGuardOutputLimit hands the guard results longer than OutputLimit
// from a provider that ignores it.
func TestGuardOutputLimit(t *testing.T) {
	cases := []struct {
		name             string
		stdout, stderr   int
		limit            int
		wantOut, wantErr int
		truncOut, trunc  bool
	}{
		{"no limit", 5000, 10, 0, 5000, 10, false, false},
		{"stdout over", 5000, 10, 1000, 1000, 10, true, false},
		{"both over", 5000, 3000, 1000, 1000, 1000, true, true},
		{"exactly the limit", 1000, 999, 1000, 1000, 999, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, _, h := guarded(t, allCaps)
			f.exec = func(context.Context, sandbox.Command) (*sandbox.ExecResult, error) {
				return &sandbox.ExecResult{ExitCode: 5, Stdout: bytes.Repeat([]byte("o"), tc.stdout), Stderr: bytes.Repeat([]byte("e"), tc.stderr)}, nil
			}
			res, err := h.Exec(context.Background(), sandbox.Command{Shell: "noisy", OutputLimit: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Stdout) != tc.wantOut || len(res.Stderr) != tc.wantErr || res.StdoutTruncated != tc.truncOut || res.StderrTruncated != tc.trunc || res.ExitCode != 5 {
				t.Errorf("stdout %d (truncated %v), stderr %d (truncated %v), exit %d; want %d (%v), %d (%v), 5",
					len(res.Stdout), res.StdoutTruncated, len(res.Stderr), res.StderrTruncated, res.ExitCode, tc.wantOut, tc.truncOut, tc.wantErr, tc.trunc)
			}
			if cap(res.Stdout) > len(res.Stdout) && tc.truncOut {
				t.Errorf("a truncated stdout keeps a capacity of %d past its length %d", cap(res.Stdout), len(res.Stdout))
			}
			t.Logf("stdout kept %d of %d bytes, stderr %d of %d (limit %d)", len(res.Stdout), tc.stdout, len(res.Stderr), tc.stderr, tc.limit)
		})
	}
}

// TestGuardExecTimeout: a provider that ignores Command.Timeout still has
// the command end at it, with DeadlineExceeded wrapped once.
func TestGuardExecTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, _, h := guarded(t, allCaps)
		var deadline time.Time
		f.exec = func(ctx context.Context, _ sandbox.Command) (*sandbox.ExecResult, error) {
			deadline, _ = ctx.Deadline()
			<-ctx.Done()
			return nil, ctx.Err() // raw, as a careless provider would
		}
		start := time.Now()
		_, err := h.Exec(context.Background(), sandbox.Command{Shell: "sleep 30", Timeout: 5 * time.Second})
		elapsed := time.Since(start)
		wantCode(t, "exec past Timeout", err, sandbox.DeadlineExceeded)
		if got, want := deadline.Sub(start), 5*time.Second; got != want {
			t.Errorf("the provider saw a deadline %v away, want %v", got, want)
		}
		if elapsed != 5*time.Second {
			t.Errorf("Exec returned after %v of fake time, want 5s", elapsed)
		}
		if msg := err.Error(); msg != "fake.exec sb-1: context deadline exceeded" {
			t.Errorf("message %q, want %q", msg, "fake.exec sb-1: context deadline exceeded")
		}
		t.Logf("a 5s Timeout ended Exec after %v (fake clock): %v", elapsed, err)
	})
}

// TestGuardSpawnTimeout: a spawned process's context is cancelled once
// Timeout has passed after Spawn returned, so a provider that kills on
// cancel (the fake does, exit 143) kills it even though it ignores
// Timeout; a process that exits first keeps its exit code.
func TestGuardSpawnTimeout(t *testing.T) {
	cases := []struct {
		name     string
		timeout  time.Duration
		exitAt   time.Duration // 0: the process never exits by itself
		wantCode int
		wantAt   time.Duration
	}{
		{"timeout kills", 3 * time.Second, 0, 143, 3 * time.Second},
		{"exit before timeout", time.Hour, time.Second, 7, time.Second},
		{"no timeout", 0, 2 * time.Hour, 7, 2 * time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f, _, h := guarded(t, allCaps)
				start := time.Now()
				pr, err := h.Spawn(context.Background(), sandbox.Command{Shell: "sleep 30", Timeout: tc.timeout})
				if err != nil {
					t.Fatal(err)
				}
				fp := f.spawns[0]
				if tc.exitAt > 0 {
					time.AfterFunc(tc.exitAt, func() { fp.exit(7) })
				}
				code, err := pr.Wait(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				at := time.Since(start)
				if code != tc.wantCode || at != tc.wantAt {
					t.Errorf("exit %d after %v, want %d after %v", code, at, tc.wantCode, tc.wantAt)
				}
				if tc.timeout == 0 && fp.ctx.Done() != nil {
					t.Error("without Timeout the provider got a derived context, want the caller's")
				}
				if tc.timeout > 0 {
					// The derived context is released at Timeout even when
					// the process exited first (no context left registered).
					time.Sleep(tc.timeout - at + time.Nanosecond)
					if fp.ctx.Err() == nil {
						t.Errorf("the spawn context is still live %v after Spawn", time.Since(start))
					}
				}
				t.Logf("exit %d after %v (fake clock), Timeout %v", code, at, tc.timeout)
			})
		})
	}
}
