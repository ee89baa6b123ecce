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
	"github.com/d10ffeed/corral/sandbox"
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
	// reattach wait, then gives up. With CRASH_ASK the host dies while a
	// permission request waits, and the relay keeps the agent for a
	// minute.
	req := harness.Request{Run: harness.Run{RunID: "run-crash", ThreadID: "t"}, Prompt: "p",
		Args: []string{bin, "-hang"}, RunDir: paths.Files, WorkspaceRoot: hd.WorkspaceRoot()}
	h := acp.New(acp.Options{ReattachWait: 500 * time.Millisecond})
	mark := "Working on"
	if os.Getenv("CRASH_ASK") != "" {
		req = askRequest(req, bin, paths)
		req.Options = map[string]string{acp.OptionApprovalWait: "1m"}
		h = acp.New(acp.Options{ReattachWait: time.Minute})
		mark = `"waiting"`
	}
	if os.Getenv("CRASH_WARM") != "" {
		h = acp.New(acp.Options{ReattachWait: time.Minute})
		if req, err = warmCrashTurns(ctx, h, hd, jdir, bin); err != nil {
			return fail(err)
		}
		mark = "Working on: PAUSE"
	}
	inv, err := h.Prepare(ctx, hd, req)
	if err != nil {
		return fail(err)
	}
	if err := journal.Start(ctx, hd, journal.Spec{Paths: paths, Nonce: nonce, Agent: inv.Command}); err != nil {
		return fail(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(paths.Journal); bytes.Contains(b, []byte(mark)) {
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

// crashKey is the answer key of the crash tests' runs.
var crashKey = []byte("crash-answer-key")

// askRequest is a run whose agent asks before it runs echo hello, which
// the policy asks about (its default denies).
func askRequest(req harness.Request, bin string, paths journal.Paths) harness.Request {
	req.Args = []string{bin}
	req.Policy = &sandbox.Policy{Commands: sandbox.CommandRules{Ask: []string{"echo *"}}, FileWrite: sandbox.Allow, Default: sandbox.Deny}
	req.AnswerKey = crashKey
	req.Journal = paths.Journal
	return req
}

// TestHostDiesWhileAsking: the process that holds an ACP session dies for
// real (no teardown, its helper processes' pipes just close) while the
// agent's permission request waits for a live answer. The relay keeps the
// agent; another process takes the session over (Harness.Reattach, as
// the runner does on a takeover), the answer comes through the answers
// file, and the same turn ends: the command ran once, the run finished.
func TestHostDiesWhileAsking(t *testing.T) {
	bin := agent(t)
	hd := newSandbox(t)
	jdir := t.TempDir()
	nonce := journal.NewNonce()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"=1", "CRASH_ASK=1", "CRASH_SANDBOX="+hd.ID(), "CRASH_JOURNALS="+jdir, "CRASH_AGENT="+bin, "CRASH_NONCE="+nonce)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the crashing host failed before it crashed: %v\n%s", err, out)
	}
	paths, err := journal.PathsFor(jdir, "run-crash")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	h := newHarness(t)
	req := askRequest(harness.Request{Run: harness.Run{RunID: "run-crash", ThreadID: "t"}, RunDir: paths.Files, WorkspaceRoot: hd.WorkspaceRoot()}, bin, paths)
	if err := h.Reattach(ctx, hd, req); err != nil {
		t.Fatal(err)
	}
	if err := harness.AppendAnswer(ctx, hd, paths.Files, crashKey, harness.Answer{ID: "acp:command:echo hello", Allow: true}); err != nil {
		t.Fatal(err)
	}
	res := readJournal(t, ctx, h, hd, paths, nonce, harness.Run{RunID: "run-crash", ThreadID: "t"})
	evs := res.events
	checkWellFormed(t, evs)
	tc := toolCalls(t, evs)["call-1"]
	if e := last(evs); e.Type != event.RunFinished || res.exit != 0 || tc == nil || tc.isError || tc.result != "hello\n" ||
		len(customs(evs, acp.EventApprovalAnswered)) != 1 || !strings.HasSuffix(text(evs, event.TextMessageContent), "Done.") {
		t.Fatalf("exit %d, events:\n%s", res.exit, dump(evs))
	}
	t.Logf("host killed while asking; taken over: exit %d, %d events, the command ran once", res.exit, len(evs))
}
