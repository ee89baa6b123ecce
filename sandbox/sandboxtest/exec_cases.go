package sandboxtest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

func (s *suite) testExec(t *testing.T) {
	ctx := s.ctx(t)
	opts := s.options(t)
	if s.caps.Env {
		if opts.Env == nil {
			opts.Env = map[string]string{}
		}
		opts.Env["CORRAL_T_CREATE"] = "from-create"
	}
	h := s.createWith(t, ctx, opts)

	for _, code := range []int{0, 1, 3, 42, 255} {
		res, err := h.Exec(ctx, sandbox.Command{Shell: fmt.Sprintf("exit %d", code)})
		if err != nil {
			t.Fatalf("exit %d: %v", code, err)
		}
		if res.ExitCode != code {
			t.Errorf("exit %d: got exit code %d", code, res.ExitCode)
		}
	}
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"corral-no-such-program"}})
	if err != nil {
		t.Errorf("a missing program is an exit code, not an error: %v", err)
	} else if res.ExitCode != 126 && res.ExitCode != 127 {
		t.Errorf("a missing program: exit code %d, want 127 (or 126)", res.ExitCode)
	}

	res, err = h.Exec(ctx, sandbox.Command{Shell: "echo out; echo err >&2; echo out2"})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "out\nout2\n" || string(res.Stderr) != "err\n" {
		t.Errorf("stdout %q stderr %q; want them separate", res.Stdout, res.Stderr)
	}

	hostile := "a b 'c' \"d\" $HOME `x` ; rm -rf / \\ \n -n"
	res, err = h.Exec(ctx, sandbox.Command{Args: []string{"printf", "%s", hostile}})
	if err != nil || string(res.Stdout) != hostile {
		t.Errorf("argv must reach the program unchanged: got %q (%v), want %q", res.Stdout, err, hostile)
	}

	if err := h.FS().MkdirAll(ctx, "sub/dir"); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(sh(t, ctx, h, "pwd")); got != h.WorkspaceRoot() {
		t.Errorf("default cwd %q, want the workspace root %q", got, h.WorkspaceRoot())
	}
	for _, dir := range []string{"sub/dir", "/workspace/sub/dir"} {
		res, err = h.Exec(ctx, sandbox.Command{Args: []string{"pwd"}, Dir: dir})
		if err != nil {
			t.Fatalf("Exec in %s: %v", dir, err)
		}
		if got, want := strings.TrimSpace(string(res.Stdout)), path.Join(h.WorkspaceRoot(), "sub/dir"); got != want {
			t.Errorf("cwd for Dir %q = %q, want %q", dir, got, want)
		}
	}
	_, err = h.Exec(ctx, sandbox.Command{Args: []string{"pwd"}, Dir: "no/such/dir"})
	wantCode(t, "Exec in a missing directory", err, sandbox.NotFound)

	if s.caps.Env {
		if err := h.SetEnv(ctx, map[string]string{"CORRAL_T_A": "a1", "CORRAL_T_B": "b1"}); err != nil {
			t.Fatal(err)
		}
		res, err = h.Exec(ctx, sandbox.Command{
			Shell: `printf '%s|%s|%s|%s' "$CORRAL_T_CREATE" "$CORRAL_T_A" "$CORRAL_T_B" "$CORRAL_T_C"`,
			Env:   map[string]string{"CORRAL_T_B": "b2", "CORRAL_T_C": "c2"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(res.Stdout), "from-create|a1|b2|c2"; got != want {
			t.Errorf("environment layers = %q, want %q (create, SetEnv, command)", got, want)
		}
		res, err = h.Exec(ctx, sandbox.Command{Shell: `test -n "$PATH" && command -v sh >/dev/null`})
		if err != nil || res.ExitCode != 0 {
			t.Errorf("the command env is an overlay: PATH must survive (%v, %+v)", err, res)
		}
		wantCode(t, "SetEnv with a bad name", h.SetEnv(ctx, map[string]string{"A=B": "x"}), sandbox.InvalidArgument)
	}

	res, err = h.Exec(ctx, sandbox.Command{Shell: "cat; echo; echo done", Stdin: strings.NewReader("from stdin")})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(res.Stdout), "from stdin\ndone\n"; got != want {
		t.Errorf("stdin: got %q, want %q", got, want)
	}
	res, err = h.Exec(ctx, sandbox.Command{Shell: "cat | wc -c"})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Errorf("without Stdin a command reads EOF at once: %q %v", res.Stdout, err)
	}
}

func (s *suite) testExecLargeOutput(t *testing.T) {
	ctx := s.ctx(t)
	h := s.create(t, ctx)
	// 16 MiB on stdout while 8 MiB go to stderr: a provider that reads
	// one stream before the other deadlocks here.
	res, err := h.Exec(ctx, sandbox.Command{Shell: "(dd if=/dev/zero bs=65536 count=128 2>/dev/null) >&2 & dd if=/dev/zero bs=65536 count=256 2>/dev/null; wait"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 16<<20 || len(res.Stderr) != 8<<20 {
		t.Errorf("got %d bytes of stdout and %d of stderr, want %d and %d", len(res.Stdout), len(res.Stderr), 16<<20, 8<<20)
	}
	res, err = h.Exec(ctx, sandbox.Command{Shell: "dd if=/dev/zero bs=65536 count=16 2>/dev/null; echo tail >&2; exit 5", OutputLimit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 1000 || !res.StdoutTruncated || res.StderrTruncated || string(res.Stderr) != "tail\n" || res.ExitCode != 5 {
		t.Errorf("bounded capture: stdout %d bytes (truncated %v), stderr %q (truncated %v), exit %d; want 1000 (true), \"tail\\n\" (false), 5",
			len(res.Stdout), res.StdoutTruncated, res.Stderr, res.StderrTruncated, res.ExitCode)
	}
}

func (s *suite) testExecDeadline(t *testing.T) {
	ctx := s.ctx(t)
	h := s.create(t, ctx)
	for _, tc := range []struct {
		name string
		run  func() error
	}{
		{"context", func() error {
			c, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			_, err := h.Exec(c, sandbox.Command{Shell: "sleep 30"})
			return err
		}},
		{"Command.Timeout", func() error {
			_, err := h.Exec(ctx, sandbox.Command{Shell: "sleep 30", Timeout: 500 * time.Millisecond})
			return err
		}},
	} {
		start := time.Now()
		err := tc.run()
		if err == nil {
			t.Errorf("%s deadline: sleep 30 returned without error", tc.name)
			continue
		}
		wantCode(t, tc.name+" deadline", err, sandbox.DeadlineExceeded)
		if d := time.Since(start); d > 20*time.Second {
			t.Errorf("%s deadline: Exec took %v to give up on a 500ms deadline", tc.name, d)
		}
	}
}

func (s *suite) testSpawn(t *testing.T) {
	ctx := s.ctx(t)
	h := s.create(t, ctx)
	// The process says "ready", then waits for a file the test writes: the
	// line can only arrive if output streams while the process runs.
	pr, err := h.Spawn(ctx, sandbox.Command{Shell: `echo ready; echo to-stderr >&2; i=0; while [ ! -e go ]; do sleep 0.05; i=$((i+1)); [ $i -gt 1200 ] && exit 9; done; echo finished; exit 7`})
	if err != nil {
		t.Fatal(err)
	}
	var errBuf strings.Builder
	errDone := make(chan struct{})
	go func() { _, _ = io.Copy(&errBuf, pr.Stderr()); close(errDone) }()
	r := bufio.NewReader(pr.Stdout())
	line, err := r.ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("first streamed line = %q, %v", line, err)
	}
	writeFile(t, ctx, h, "go", nil)
	rest, _ := io.ReadAll(r)
	if string(rest) != "finished\n" {
		t.Errorf("rest of stdout = %q", rest)
	}
	code, err := pr.Wait(ctx)
	if err != nil || code != 7 {
		t.Errorf("Wait = %d, %v; want 7", code, err)
	}
	<-errDone
	if errBuf.String() != "to-stderr\n" {
		t.Errorf("stderr = %q", errBuf.String())
	}
	if code, err := pr.Wait(ctx); err != nil || code != 7 {
		t.Errorf("a second Wait = %d, %v; want 7", code, err)
	}
	if err := pr.Kill(ctx, 0); err != nil {
		t.Errorf("Kill after exit must succeed: %v", err)
	}
}

func (s *suite) testSpawnStdin(t *testing.T) {
	s.skipUnless(t, "writableStdin")
	ctx := s.ctx(t)
	h := s.create(t, ctx)
	pr, err := h.Spawn(ctx, sandbox.Command{Shell: `while read -r line; do echo "got:$line"; done; echo eof`})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr.Stderr()) }()
	r := bufio.NewReader(pr.Stdout())
	if _, err := io.WriteString(pr.Stdin(), "ping\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "got:ping\n" {
		t.Fatalf("echo of a stdin line = %q, %v (stdin must reach the process while it runs)", line, err)
	}
	if _, err := io.WriteString(pr.Stdin(), "pong\n"); err != nil {
		t.Fatal(err)
	}
	if err := pr.Stdin().Close(); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(r)
	if string(rest) != "got:pong\neof\n" {
		t.Errorf("after closing stdin: %q, want %q (EOF must reach the process and stdout must survive)", rest, "got:pong\neof\n")
	}
	if code, err := pr.Wait(ctx); err != nil || code != 0 {
		t.Errorf("Wait = %d, %v", code, err)
	}
}

func (s *suite) testConcurrentExec(t *testing.T) {
	ctx := s.ctx(t)
	h := s.create(t, ctx)
	const n = 16
	var wg sync.WaitGroup
	errs := make([]string, n)
	for i := range n {
		wg.Go(func() {
			res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `printf "%s" "$1"; printf "e%s" "$1" >&2; exit $(( $1 % 7 ))`, "sh", fmt.Sprint(i)}})
			switch {
			case err != nil:
				errs[i] = err.Error()
			case string(res.Stdout) != fmt.Sprint(i) || string(res.Stderr) != fmt.Sprintf("e%d", i) || res.ExitCode != i%7:
				errs[i] = fmt.Sprintf("got stdout %q stderr %q exit %d", res.Stdout, res.Stderr, res.ExitCode)
			}
		})
	}
	wg.Wait()
	for i, e := range errs {
		if e != "" {
			t.Errorf("exec %d of %d concurrent: %s", i, n, e)
		}
	}
}

// testOwnProcessTable checks the claim that the sandbox's process table is
// its own: a process started on the test's host must not be visible from
// inside. (The journal kills the orphans a run leaves in such a sandbox; on
// a shared table that would reach processes that are not the sandbox's.)
func (s *suite) testOwnProcessTable(t *testing.T) {
	if !s.caps.OwnProcessTable {
		t.Skipf("provider %q does not claim ownProcessTable", s.h.Provider.Name())
	}
	ctx := s.ctx(t)
	h := s.create(t, ctx)
	marker := fmt.Sprintf("%d", 5_000_000+time.Now().UnixNano()%900_000)
	host := exec.Command("sleep", marker)
	if err := host.Start(); err != nil {
		t.Fatalf("starting the host process: %v", err)
	}
	t.Cleanup(func() { _ = host.Process.Kill(); _ = host.Wait() })
	pat := marker[:len(marker)-1] + "[" + marker[len(marker)-1:] + "]"
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `for f in /proc/[0-9]*/cmdline; do tr '\000' ' ' <"$f" 2>/dev/null; echo; done | grep -c -E -- "$1"`, "corral-see", pat}})
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.TrimSpace(string(res.Stdout)); n != "0" {
		t.Errorf("the sandbox sees %s host process(es) (sleep %s): its process table is not its own", n, marker)
	}
}
