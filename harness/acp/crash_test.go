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
	"github.com/d10ffeed/corral/harness/acp"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/provider/local"
)

const crashChildEnv = "CORRAL_ACP_CRASH_CHILD"

// crashChild is a host that starts an ACP run and dies abruptly mid-turn,
// without any teardown: its pipes to the helper processes just close.
// Its arguments come in the environment: the sandbox directory, the
// journal directory, the agent, the nonce.
func crashChild() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		return 2
	}
	dir, jdir, bin, nonce := os.Getenv("CRASH_SANDBOX"), os.Getenv("CRASH_JOURNALS"), os.Getenv("CRASH_AGENT"), os.Getenv("CRASH_NONCE")
	ctx := context.Background()
	p, err := local.New(local.Options{BaseDir: filepath.Dir(dir)})
	if err != nil {
		return fail(err)
	}
	hd, err := p.Resume(ctx, dir)
	if err != nil {
		return fail(err)
	}
	paths, err := journal.PathsFor(jdir, "run-crash")
	if err != nil {
		return fail(err)
	}
	// Nobody takes the session over: the relay keeps the agent for the
	// reattach wait, then gives up.
	h := acp.New(acp.Options{ReattachWait: 500 * time.Millisecond})
	inv, err := h.Prepare(ctx, hd, harness.Request{Run: harness.Run{RunID: "run-crash", ThreadID: "t"}, Prompt: "p",
		Args: []string{bin, "-hang"}, RunDir: paths.Files, WorkspaceRoot: hd.WorkspaceRoot()})
	if err != nil {
		return fail(err)
	}
	if err := journal.Start(ctx, hd, journal.Spec{Paths: paths, Nonce: nonce, Agent: inv.Command}); err != nil {
		return fail(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(paths.Journal); bytes.Contains(b, []byte("Working on")) {
			return 0 // gone, mid-turn
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fail(fmt.Errorf("the agent never spoke"))
}

// TestHostDiesMidTurn kills the process that holds an ACP session: the
// relay must notice, stop the agent and end the journal, and the journal
// must translate into the events so far and a session-lost error.
func TestHostDiesMidTurn(t *testing.T) {
	bin := agent(t)
	hd := newSandbox(t)
	jdir := t.TempDir()
	nonce := journal.NewNonce()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"=1", "CRASH_SANDBOX="+hd.ID(), "CRASH_JOURNALS="+jdir, "CRASH_AGENT="+bin, "CRASH_NONCE="+nonce)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the crashing host failed before it crashed: %v\n%s", err, out)
	}
	paths, err := journal.PathsFor(jdir, "run-crash")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	res := readJournal(t, ctx, acp.New(acp.Options{}), hd, paths, nonce, harness.Run{RunID: "run-crash", ThreadID: "t"})
	evs := res.events
	checkWellFormed(t, evs)
	e := last(evs)
	if e.Type != event.RunError || e.Code != acp.CodeSessionLost || res.exit != 75 {
		t.Fatalf("exit %d, events:\n%s", res.exit, dump(evs))
	}
	if got := text(evs, event.TextMessageContent); got != "Working on: p" {
		t.Errorf("the events before the crash are kept: %q", got)
	}
	if s := customs(evs, event.SessionStarted); len(s) != 1 {
		t.Errorf("the session id is kept for the next run: %s", s)
	}
	tail, err := journal.ErrTail(ctx, hd, paths, 1000)
	if err != nil || !strings.Contains(tail, "went away") {
		t.Errorf("the relay explains the exit on stderr: %q, %v", tail, err)
	}
	for i := 0; ; i++ {
		st, err := journal.Probe(ctx, hd, paths, nonce)
		if err == nil && !st.Alive && st.Finished {
			break
		}
		if i == 1200 { // a hang guard of a minute
			t.Fatalf("the relay should be gone: %+v, %v", st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
