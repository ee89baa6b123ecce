package acp_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/provider/docker"
	"github.com/d10ffeed/corral/sandbox"
)

// TestAgentProcessesContainedDocker is TestAgentProcessesContained in a
// Docker sandbox (busybox: its sh, setsid, grep): the launcher, the
// lingering agent, its background and its double-forked setsid children
// are gone after the run, and after a cancel (session/cancel, then the
// journal's kill).
func TestAgentProcessesContainedDocker(t *testing.T) {
	testutil.NeedDocker(t)
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go tool is needed to build the scripted agent")
	}
	bin := filepath.Join(t.TempDir(), "acpagent")
	build := exec.Command("go", "build", "-o", bin, "github.com/d10ffeed/corral/internal/acpagent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the scripted agent: %v\n%s", err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	p, err := docker.New(docker.Options{Image: testutil.DockerTestImage})
	if err != nil {
		t.Fatal(err)
	}
	newBox := func(t *testing.T) (sandbox.Handle, string) {
		t.Helper()
		ctx := testCtx(t)
		hd, err := p.Create(ctx, sandbox.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = hd.Destroy(context.Background()) })
		if err := hd.FS().WriteFile(ctx, "input.txt", []byte("the input\n")); err != nil {
			t.Fatal(err)
		}
		// Outside the workspace, so the agent is no file of the run.
		res, err := hd.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `cat >/tmp/acpagent && chmod 755 /tmp/acpagent`}, Stdin: bytes.NewReader(data)})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("installing the agent: %v %s", err, res.Stderr)
		}
		return hd, "/tmp/acpagent"
	}
	count := func(t *testing.T, hd sandbox.Handle, mark string) (int, string) {
		t.Helper()
		res, err := hd.Exec(testCtx(t), sandbox.Command{Args: []string{"sh", "-c",
			`for f in $(grep -lsxzF "$1" /proc/[0-9]*/environ); do p=${f#/proc/}; p=${p%/environ}; echo "$p $(tr '\0' ' ' </proc/$p/cmdline)"; done`,
			"corral-count", markEnv + "=" + mark}})
		if err != nil {
			t.Fatal(err)
		}
		out := strings.TrimSpace(string(res.Stdout))
		if out == "" {
			return 0, ""
		}
		return len(strings.Split(out, "\n")), out
	}
	var afterRun, afterCancel int

	t.Run("AfterTheRun", func(t *testing.T) {
		hd, agentBin := newBox(t)
		mark := fmt.Sprintf("docker-end-%d", time.Now().UnixNano())
		h := newHarness(t)
		res := runTurn(t, h, hd, harness.Request{Run: harness.Run{RunID: "run-docker"}, Prompt: "p",
			Args: []string{agentBin, "-launcher", "-children", "-linger"}, Env: map[string]string{markEnv: mark}, Policy: &sandbox.Policy{Default: sandbox.Allow}})
		if last(res.events).Type != event.RunFinished {
			t.Fatalf("the run should finish: %s", dump(res.events))
		}
		if err := h.Wait(testCtx(t), "run-docker"); err != nil {
			t.Fatal(err)
		}
		n, which := count(t, hd, mark)
		afterRun = n
		if n != 0 {
			t.Errorf("processes left after the run: %d\n%s", n, which)
		}
	})

	t.Run("AfterCancel", func(t *testing.T) {
		hd, agentBin := newBox(t)
		mark := fmt.Sprintf("docker-cancel-%d", time.Now().UnixNano())
		h := newHarness(t)
		ctx := testCtx(t)
		paths, err := journal.PathsFor("/tmp/corral-test-journals", "run-docker-cancel")
		if err != nil {
			t.Fatal(err)
		}
		inv, err := h.Prepare(ctx, hd, harness.Request{Run: harness.Run{RunID: "run-docker-cancel", ThreadID: "t"}, Prompt: "p",
			Args: []string{agentBin, "-launcher", "-children", "-linger", "-hang"}, Env: map[string]string{markEnv: mark},
			RunDir: paths.Files, WorkspaceRoot: hd.WorkspaceRoot()})
		if err != nil {
			t.Fatal(err)
		}
		nonce := journal.NewNonce()
		if err := journal.Start(ctx, hd, journal.Spec{Paths: paths, Nonce: nonce, Agent: inv.Command}); err != nil {
			t.Fatal(err)
		}
		rd := &journal.Reader{Handle: hd, Paths: paths, Nonce: nonce, FirstByteTimeout: 30 * time.Second}
		var text strings.Builder
		cancelled := false
		if _, err := rd.Read(ctx, 0, func(l journal.Line) error {
			text.Write(l.Data)
			if !cancelled && bytes.Contains(l.Data, []byte("Working on")) {
				cancelled = true
				if n, which := count(t, hd, mark); n < 4 {
					t.Errorf("the agent should run with its children before the cancel: %d\n%s", n, which)
				}
				// What the runner does on cancel.
				h.Interrupt(ctx, "run-docker-cancel")
				return journal.Kill(ctx, hd, paths, time.Second)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text.String(), "Cancelled by the client.") {
			t.Error("the agent should have been sent session/cancel")
		}
		if err := h.Wait(ctx, "run-docker-cancel"); err != nil {
			t.Fatal(err)
		}
		n, which := count(t, hd, mark)
		afterCancel = n
		if n != 0 {
			t.Errorf("processes left after cancel: %d\n%s", n, which)
		}
	})
	t.Logf("docker: processes left after run: %d, after cancel: %d", afterRun, afterCancel)
}
