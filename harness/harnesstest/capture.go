package harnesstest

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/sandbox"
)

// CaptureSandbox returns a local sandbox for a capture (destroyed at the
// test's end), its directory a git work tree holding README.md, and a
// context that ends with the test or after two minutes.
func CaptureSandbox(t *testing.T) (context.Context, sandbox.Handle) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	sb := testutil.LocalSandbox(t)
	testutil.Git(t, sb.ID(), "init", "-q")
	if err := os.WriteFile(filepath.Join(sb.ID(), "README.md"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return ctx, sb
}

// WriteFixture writes a capture's output to testdata/name, the sandbox's
// directory (sb.ID()) rewritten to /workspace.
func WriteFixture(t *testing.T, sb sandbox.Handle, name string, out []byte) {
	t.Helper()
	out = bytes.ReplaceAll(out, []byte(sb.ID()), []byte("/workspace"))
	if err := os.WriteFile(filepath.Join("testdata", name), out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Capture prepares h's command for req in the local sandbox sb, runs it
// directly on the host (its cwd the sandbox's directory, sb.ID() for the
// local provider) and returns its stdout: the journal a run would record,
// for the testdata fixtures. With kill set, once a line containing kill
// appeared and wait passed, the process group gets SIGTERM, and SIGKILL two
// seconds later, as a cancel does.
func Capture(t *testing.T, ctx context.Context, h harness.Harness, sb sandbox.Handle, req harness.Request, kill string, wait time.Duration) []byte {
	t.Helper()
	inv, err := h.Prepare(ctx, sb, req)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, inv.Command.Args[0], inv.Command.Args[1:]...)
	cmd.Dir = sb.ID()
	cmd.Env = os.Environ()
	for k, v := range inv.Command.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = bytes.NewReader(inv.Stdin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		out.Write(sc.Bytes())
		out.WriteByte('\n')
		if kill != "" && strings.Contains(sc.Text(), kill) {
			kill = ""
			time.Sleep(wait)
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			time.AfterFunc(2*time.Second, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
		}
	}
	err = cmd.Wait()
	t.Logf("%s exited: %v; stderr:\n%s", h.Name(), err, stderr.String())
	return out.Bytes()
}
