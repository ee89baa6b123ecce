package acp_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/acp"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// markEnv is the variable the containment tests mark an agent's processes
// with: everything the agent starts inherits it.
const markEnv = "CORRAL_ACP_TEST_MARK"

// marked returns the pids of live processes whose environment holds
// markEnv=mark (zombies have no readable environment and do not count).
func marked(t *testing.T, mark string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc to scan: %v", err)
	}
	want := []byte(markEnv + "=" + mark)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, want) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// describe names processes for a failure message.
func describe(pids []int) string {
	var b strings.Builder
	for _, p := range pids {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		fmt.Fprintf(&b, "\n  %d %s", p, bytes.ReplaceAll(bytes.TrimRight(cmd, "\x00"), []byte{0}, []byte{' '}))
	}
	return b.String()
}

// killMarked cleans up after a failed containment test.
func killMarked(t *testing.T, mark string) {
	t.Cleanup(func() {
		for _, p := range marked(t, mark) {
			if proc, err := os.FindProcess(p); err == nil {
				_ = proc.Kill()
			}
		}
	})
}

// TestAgentProcessesContained runs the scripted agent behind a launcher
// that forks it (as npm's launchers do), with a background child and a
// double-forked, setsid child, and an agent that does not exit when its
// stdin closes: once the run has ended, and once a run was cancelled,
// none of those processes may remain. On cancel the agent must have been
// sent session/cancel before it was killed (it says so in its last
// message).
func TestAgentProcessesContained(t *testing.T) {
	bin := agent(t)
	agentArgs := []string{bin, "-launcher", "-children", "-linger"}
	var afterRun, afterCancel, afterKill int

	t.Run("AfterTheRun", func(t *testing.T) {
		mark := fmt.Sprintf("end-%d-%d", os.Getpid(), time.Now().UnixNano())
		killMarked(t, mark)
		h := newHarness(t)
		hd := newSandbox(t)
		res := runTurn(t, h, hd, harness.Request{Run: harness.Run{RunID: "run-contain"}, Prompt: "p", Args: agentArgs,
			Env: map[string]string{markEnv: mark}, Policy: &sandbox.Policy{Default: sandbox.Allow}})
		if last(res.events).Type != event.RunFinished {
			t.Fatalf("the run should finish: %s", dump(res.events))
		}
		ctx := testCtx(t)
		if err := h.Wait(ctx, "run-contain"); err != nil {
			t.Fatal(err)
		}
		left := marked(t, mark)
		afterRun = len(left)
		if len(left) != 0 {
			t.Errorf("processes left after the run: %d%s", len(left), describe(left))
		}
	})

	t.Run("AfterCancel", func(t *testing.T) {
		mark := fmt.Sprintf("cancel-%d-%d", os.Getpid(), time.Now().UnixNano())
		killMarked(t, mark)
		h := newHarness(t)
		r := newRunner(t, h, nil)
		ctx := testCtx(t)
		rec, err := r.Start(ctx, run.StartRequest{Definition: "d", Thread: "th", Harness: acp.Name, Prompt: "p",
			Args: append(agentArgs, "-hang"), Env: map[string]string{markEnv: mark}})
		if err != nil {
			t.Fatal(err)
		}
		var evs []event.Event
		cancelled := false
		err = r.Follow(ctx, rec.ID, 0, func(e store.Event) error {
			ev, err := event.Unmarshal(e.Data)
			if err != nil {
				return err
			}
			evs = append(evs, ev)
			if ev.Type == event.TextMessageContent && !cancelled {
				cancelled = true
				if n := len(marked(t, mark)); n < 4 {
					t.Errorf("the agent should be running with its children before the cancel: %d processes", n)
				}
				_, err = r.Cancel(ctx, rec.ID)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if e := last(evs); !e.Cancelled() {
			t.Fatalf("the run should end cancelled: %s", dump(evs))
		}
		if got := text(evs, event.TextMessageContent); !strings.Contains(got, "Cancelled by the client.") {
			t.Errorf("the agent should have been sent session/cancel before it was killed: text %q", got)
		}
		if err := h.Wait(ctx, rec.ID); err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(ctx, rec.ID); err != nil {
			t.Fatal(err)
		}
		left := marked(t, mark)
		afterCancel = len(left)
		if len(left) != 0 {
			t.Errorf("processes left after cancel: %d%s", len(left), describe(left))
		}
	})
	// A cancel handled by a process that does not hold the ACP session
	// (the run was taken over): no session/cancel, the journal's kill
	// reaches the relay, which stops the agent's group and marked
	// processes before it exits.
	t.Run("AfterKillWithoutTheSession", func(t *testing.T) {
		mark := fmt.Sprintf("kill-%d-%d", os.Getpid(), time.Now().UnixNano())
		killMarked(t, mark)
		h := newHarness(t)
		hd := newSandbox(t)
		ctx := testCtx(t)
		paths, err := journal.PathsFor(t.TempDir(), "run-kill")
		if err != nil {
			t.Fatal(err)
		}
		inv, err := h.Prepare(ctx, hd, harness.Request{Run: harness.Run{RunID: "run-kill", ThreadID: "t"}, Prompt: "p",
			Args: append(agentArgs, "-hang"), Env: map[string]string{markEnv: mark}, RunDir: paths.Files, WorkspaceRoot: hd.WorkspaceRoot()})
		if err != nil {
			t.Fatal(err)
		}
		nonce := journal.NewNonce()
		if err := journal.Start(ctx, hd, journal.Spec{Paths: paths, Nonce: nonce, Agent: inv.Command}); err != nil {
			t.Fatal(err)
		}
		rd := &journal.Reader{Handle: hd, Paths: paths, Nonce: nonce, FirstByteTimeout: 30 * time.Second}
		killed := false
		if _, err := rd.Read(ctx, 0, func(l journal.Line) error {
			if !killed && bytes.Contains(l.Data, []byte("Working on")) {
				killed = true
				if n := len(marked(t, mark)); n < 4 {
					t.Errorf("the agent should be running with its children before the kill: %d processes", n)
				}
				return journal.Kill(ctx, hd, paths, time.Second)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := h.Wait(ctx, "run-kill"); err != nil {
			t.Fatal(err)
		}
		left := marked(t, mark)
		afterKill = len(left)
		if len(left) != 0 {
			t.Errorf("processes left after the kill: %d%s", len(left), describe(left))
		}
	})
	t.Logf("processes left after run: %d, after cancel: %d, after a kill without the session: %d", afterRun, afterCancel, afterKill)
}
