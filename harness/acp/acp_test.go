package acp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/acp"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/sandbox"
)

var update = flag.Bool("update", false, "rewrite the golden files from this run")

// agentPath builds the scripted agent once per test binary.
var agentPath = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "corral-acpagent-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "acpagent")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/d10ffeed/corral/internal/acpagent").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building the scripted agent: %v\n%s", err, out)
	}
	return bin, nil
})

func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(crashChild())
	}
	code := m.Run()
	if bin, err := agentPath(); err == nil {
		_ = os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}

func agent(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go tool is needed to build the scripted agent")
	}
	bin, err := agentPath()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newSandbox returns a local sandbox with input.txt in its workspace.
func newSandbox(t *testing.T) sandbox.Handle {
	t.Helper()
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	h, err := p.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	if err := h.FS().WriteFile(ctx, "input.txt", []byte("the input\n")); err != nil {
		t.Fatal(err)
	}
	return h
}

func newHarness(t *testing.T) *acp.Harness {
	t.Helper()
	h := acp.New(acp.Options{StartTimeout: 30 * time.Second, ExitGrace: 2 * time.Second})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := h.Close(ctx); err != nil {
			t.Errorf("closing the harness: %v", err)
		}
	})
	return h
}

type result struct {
	lines  [][]byte // the journal's lines (start line and sentinel excluded)
	exit   int
	events []event.Event
	root   string
}

var runSeq struct {
	sync.Mutex
	n int
}

// runTurn prepares and journals one ACP run as the runner does, reads the
// journal to its end and translates it.
func runTurn(t *testing.T, h *acp.Harness, hd sandbox.Handle, req harness.Request) result {
	t.Helper()
	return runTurnWatch(t, h, hd, req, nil)
}

// runTurnWatch is runTurn with a callback for every journal line as it is
// read.
func runTurnWatch(t *testing.T, h *acp.Harness, hd sandbox.Handle, req harness.Request, onLine func([]byte)) result {
	t.Helper()
	ctx := testCtx(t)
	runSeq.Lock()
	runSeq.n++
	if req.RunID == "" {
		req.RunID = fmt.Sprintf("run-%d", runSeq.n)
	}
	runSeq.Unlock()
	if req.ThreadID == "" {
		req.ThreadID = "thread-1"
	}
	paths, err := journal.PathsFor(t.TempDir(), req.RunID)
	if err != nil {
		t.Fatal(err)
	}
	req.RunDir = paths.Files
	req.WorkspaceRoot = hd.WorkspaceRoot()
	inv, err := h.Prepare(ctx, hd, req)
	if err != nil {
		t.Fatal(err)
	}
	nonce := journal.NewNonce()
	if err := journal.Start(ctx, hd, journal.Spec{Paths: paths, Nonce: nonce, Agent: inv.Command, Stdin: inv.Stdin}); err != nil {
		t.Fatal(err)
	}
	return readJournalWatch(t, ctx, h, hd, paths, nonce, req.Run, onLine)
}

func readJournal(t *testing.T, ctx context.Context, h harness.Harness, hd sandbox.Handle, paths journal.Paths, nonce string, run harness.Run) result {
	t.Helper()
	return readJournalWatch(t, ctx, h, hd, paths, nonce, run, nil)
}

func readJournalWatch(t *testing.T, ctx context.Context, h harness.Harness, hd sandbox.Handle, paths journal.Paths, nonce string, run harness.Run, onLine func([]byte)) result {
	t.Helper()
	rd := &journal.Reader{Handle: hd, Paths: paths, Nonce: nonce, FirstByteTimeout: 30 * time.Second}
	var res result
	exit, err := rd.Read(ctx, 0, func(l journal.Line) error {
		if l.Diff == nil {
			res.lines = append(res.lines, append([]byte(nil), l.Data...))
			if onLine != nil {
				onLine(l.Data)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the journal: %v", err)
	}
	res.exit = exit.Code
	res.root = hd.WorkspaceRoot()
	res.events = translate(h.Translator(run), res.lines, res.exit)
	return res
}

func translate(tr harness.Translator, lines [][]byte, exit int) []event.Event {
	evs := tr.Begin()
	for _, l := range lines {
		evs = append(evs, tr.Line(l)...)
	}
	return append(evs, tr.End(exit)...)
}

// Helpers over events.

func last(evs []event.Event) event.Event { return evs[len(evs)-1] }

func text(evs []event.Event, typ event.Type) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type == typ {
			b.WriteString(e.Delta)
		}
	}
	return b.String()
}

func customs(evs []event.Event, name string) []json.RawMessage {
	var out []json.RawMessage
	for _, e := range evs {
		if e.Type == event.Custom && e.Name == name {
			out = append(out, e.Value)
		}
	}
	return out
}

type toolCall struct {
	name, args, result string
	isError, ended     bool
}

func toolCalls(t *testing.T, evs []event.Event) map[string]*toolCall {
	t.Helper()
	out := map[string]*toolCall{}
	for _, e := range evs {
		switch e.Type {
		case event.ToolCallStart:
			if out[e.ToolCallID] != nil {
				t.Errorf("tool call %s started twice", e.ToolCallID)
			}
			out[e.ToolCallID] = &toolCall{name: e.ToolCallName}
		case event.ToolCallArgs:
			out[e.ToolCallID].args += e.Delta
		case event.ToolCallEnd:
			out[e.ToolCallID].ended = true
		case event.ToolCallResult:
			tc := out[e.ToolCallID]
			if tc.result != "" {
				t.Errorf("tool call %s has two results", e.ToolCallID)
			}
			tc.result, tc.isError = e.Content, e.IsError
		}
	}
	for id, tc := range out {
		if !tc.ended || !json.Valid([]byte(tc.args)) {
			t.Errorf("tool call %s: ended %v, args %q", id, tc.ended, tc.args)
		}
	}
	return out
}

func approvals(t *testing.T, evs []event.Event) []event.Approval {
	t.Helper()
	var out []event.Approval
	for _, v := range customs(evs, event.ApprovalRequested) {
		var a event.Approval
		if err := json.Unmarshal(v, &a); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

func readWorkspace(t *testing.T, hd sandbox.Handle, name string) (string, bool) {
	t.Helper()
	b, err := hd.FS().ReadFile(context.Background(), name)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

// checkWellFormed checks the invariants every run's events keep.
func checkWellFormed(t *testing.T, evs []event.Event) {
	t.Helper()
	if len(evs) < 2 || evs[0].Type != event.RunStarted || !last(evs).Terminal() {
		t.Fatalf("a run starts with RUN_STARTED and ends terminal: %s", dump(evs))
	}
	for _, e := range evs[:len(evs)-1] {
		if e.Terminal() {
			t.Fatalf("terminal event before the end: %s", dump(evs))
		}
	}
	toolCalls(t, evs)
	for _, tc := range toolCalls(t, evs) {
		if tc.result == "" {
			t.Errorf("a tool call has no result: %s", dump(evs))
		}
	}
}

func dump(evs []event.Event) string {
	var b bytes.Buffer
	for _, e := range evs {
		b.Write(e.Marshal())
		b.WriteByte('\n')
	}
	return b.String()
}

func TestTurnAllowedByPolicy(t *testing.T) {
	bin := agent(t)
	hd := newSandbox(t)
	h := newHarness(t)
	res := runTurn(t, h, hd, harness.Request{Prompt: "tidy up", Args: []string{bin},
		Policy: &sandbox.Policy{Default: sandbox.Allow}})
	evs := res.events
	checkWellFormed(t, evs)
	if e := last(evs); e.Type != event.RunFinished || res.exit != 0 {
		t.Fatalf("the run should finish cleanly (exit %d): %s", res.exit, dump(evs))
	}
	if got := text(evs, event.ReasoningContent); got != "Planning the work." {
		t.Errorf("reasoning = %q", got)
	}
	if got := text(evs, event.TextMessageContent); got != "Working on: tidy up input.txt: the inputDone." {
		t.Errorf("text = %q", got)
	}
	tcs := toolCalls(t, evs)
	run := tcs["call-1"]
	if run == nil || run.name != "execute" || run.result != "hello\n" || run.isError || !strings.Contains(run.args, `"command":"echo hello"`) {
		t.Errorf("the command's tool call = %+v", run)
	}
	write := tcs["call-2"]
	if write == nil || write.name != "edit" || write.result != "wrote notes.txt" || write.isError {
		t.Errorf("the write's tool call = %+v", write)
	}
	if got, ok := readWorkspace(t, hd, "notes.txt"); !ok || got != "hello from acp\n" {
		t.Errorf("notes.txt = %q (exists %v)", got, ok)
	}
	if s := customs(evs, event.SessionStarted); len(s) != 1 || string(s[0]) != `{"id":"sess-1"}` {
		t.Errorf("session.started = %s", s)
	}
	if p := customs(evs, acp.EventPlan); len(p) != 1 || !strings.Contains(string(p[0]), "run the command") {
		t.Errorf("plan = %s", p)
	}
	if a := approvals(t, evs); len(a) != 0 {
		t.Errorf("no approval is needed under an allow policy: %+v", a)
	}
	// The translation is a pure function of the journal.
	again := translate(h.Translator(harness.Run{RunID: "run-x", ThreadID: "thread-1"}), res.lines, res.exit)
	first := translate(h.Translator(harness.Run{RunID: "run-x", ThreadID: "thread-1"}), res.lines, res.exit)
	if dump(again) != dump(first) {
		t.Error("translating the same journal twice gave different events")
	}
	saveFixture(t, "allowed", res)
}

func TestTurnAskAndDeny(t *testing.T) {
	bin := agent(t)
	policy := &sandbox.Policy{Commands: sandbox.CommandRules{Ask: []string{"echo *"}}, FileWrite: sandbox.Deny, Default: sandbox.Allow}
	t.Run("AskRejectsAndRequestsApproval", func(t *testing.T) {
		hd := newSandbox(t)
		res := runTurn(t, newHarness(t), hd, harness.Request{Prompt: "p", Args: []string{bin}, Policy: policy})
		evs := res.events
		checkWellFormed(t, evs)
		if last(evs).Type != event.RunFinished {
			t.Fatalf("a rejected call does not fail the run: %s", dump(evs))
		}
		tcs := toolCalls(t, evs)
		if tc := tcs["call-1"]; tc == nil || !tc.isError || tc.result != "permission denied" {
			t.Errorf("the command should be rejected: %+v", tc)
		}
		if tc := tcs["call-2"]; tc == nil || !tc.isError || tc.result != "permission denied" {
			t.Errorf("the write should be denied: %+v", tc)
		}
		want := []event.Approval{{ID: "acp:command:echo hello", Kind: "command", Target: "echo hello", Title: "Run echo hello"}}
		if got := approvals(t, evs); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("approvals = %+v, want %+v", got, want)
		}
		if _, ok := readWorkspace(t, hd, "notes.txt"); ok {
			t.Error("a denied write must not happen")
		}
		saveFixture(t, "ask-deny", res)
	})
	t.Run("ApprovalGiven", func(t *testing.T) {
		hd := newSandbox(t)
		res := runTurn(t, newHarness(t), hd, harness.Request{Prompt: "p", Args: []string{bin}, Policy: policy,
			Approvals: map[string]bool{"acp:command:echo hello": true}})
		tcs := toolCalls(t, res.events)
		if tc := tcs["call-1"]; tc == nil || tc.isError || tc.result != "hello\n" {
			t.Errorf("an approved command runs: %+v", tc)
		}
		if a := approvals(t, res.events); len(a) != 0 {
			t.Errorf("no approval is asked again: %+v", a)
		}
	})
	t.Run("TerminalGatedWithoutPermissionRequest", func(t *testing.T) {
		hd := newSandbox(t)
		res := runTurn(t, newHarness(t), hd, harness.Request{Prompt: "p", Args: []string{bin, "-no-permission"},
			Policy: &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"echo *"}}, Default: sandbox.Allow}})
		tc := toolCalls(t, res.events)["call-1"]
		if tc == nil || !tc.isError || !strings.Contains(tc.result, "denied by the sandbox policy") {
			t.Errorf("terminal/create must apply the command rules: %+v", tc)
		}
		if got, _ := readWorkspace(t, hd, "notes.txt"); got != "hello from acp\n" {
			t.Errorf("the allowed write happens: %q", got)
		}
	})
	t.Run("NoPolicyAllowsEverything", func(t *testing.T) {
		hd := newSandbox(t)
		res := runTurn(t, newHarness(t), hd, harness.Request{Prompt: "p", Args: []string{bin}})
		if a := approvals(t, res.events); len(a) != 0 {
			t.Errorf("approvals = %+v", a)
		}
		if tc := toolCalls(t, res.events)["call-1"]; tc == nil || tc.isError || tc.result != "hello\n" {
			t.Errorf("the command runs: %+v", tc)
		}
		if got, _ := readWorkspace(t, hd, "notes.txt"); got != "hello from acp\n" {
			t.Errorf("the write happens: %q", got)
		}
	})
	t.Run("EmptyPolicyAsksForEverything", func(t *testing.T) {
		hd := newSandbox(t)
		res := runTurn(t, newHarness(t), hd, harness.Request{Prompt: "p", Args: []string{bin}, Policy: &sandbox.Policy{}})
		var ids []string
		for _, a := range approvals(t, res.events) {
			ids = append(ids, a.ID)
		}
		if strings.Join(ids, " ") != "acp:command:echo hello acp:fileWrite:notes.txt" {
			t.Errorf("approvals = %v", ids)
		}
	})
}

func TestSessionResume(t *testing.T) {
	bin := agent(t)
	cases := []struct {
		name, session string
		args          []string
		started       string
		notResumed    string
	}{
		{name: "Loaded", session: "sess-known", args: []string{"-load"}, started: "sess-known"},
		{name: "UnknownSession", session: "sess-gone", args: []string{"-load"}, started: "sess-1", notResumed: "session/load failed"},
		{name: "AgentCannotLoad", session: "sess-known", started: "sess-1", notResumed: "the agent cannot load sessions"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hd := newSandbox(t)
			res := runTurn(t, newHarness(t), hd, harness.Request{Prompt: "again", Session: c.session,
				Args: append([]string{bin}, c.args...), Policy: &sandbox.Policy{Default: sandbox.Allow}})
			evs := res.events
			if last(evs).Type != event.RunFinished {
				t.Fatalf("run: %s", dump(evs))
			}
			if s := customs(evs, event.SessionStarted); len(s) != 1 || string(s[0]) != `{"id":"`+c.started+`"}` {
				t.Errorf("session.started = %s", s)
			}
			if strings.Contains(text(evs, event.TextMessageContent), "old history") {
				t.Error("the history a load replays must not be journaled")
			}
			nr := customs(evs, acp.EventSessionNotResumed)
			switch {
			case c.notResumed == "" && len(nr) != 0:
				t.Errorf("unexpected session.not_resumed: %s", nr)
			case c.notResumed != "" && (len(nr) != 1 || !strings.Contains(string(nr[0]), c.notResumed) || !strings.Contains(string(nr[0]), c.session)):
				t.Errorf("session.not_resumed = %s, want %q", nr, c.notResumed)
			}
		})
	}
}

func TestMCPServers(t *testing.T) {
	bin := agent(t)
	secrets, err := sandbox.NewSecrets(map[string]string{"DOCS_TOKEN": "s3cr3t-token-value"})
	if err != nil {
		t.Fatal(err)
	}
	servers := []sandbox.MCPServer{
		{Name: "docs", URL: "http://127.0.0.1:1/mcp", Headers: map[string]string{"Authorization": "Bearer ${secret:DOCS_TOKEN}"}},
		{Name: "events", Type: "sse", URL: "http://127.0.0.1:1/sse"},
		{Name: "local", Command: "true", Env: map[string]string{"TOKEN": "${secret:DOCS_TOKEN}"}},
	}
	hd := newSandbox(t)
	res := runTurn(t, newHarness(t), hd, harness.Request{Prompt: "p", Args: []string{bin, "-mcp-http"}, Secrets: secrets,
		Policy: &sandbox.Policy{Default: sandbox.Allow}, MCPServers: servers})
	if got := text(res.events, event.TextMessageContent); !strings.Contains(got, "(mcp: docs,local)") {
		t.Errorf("the agent should get the http and stdio servers: %q", got)
	}
	if w := customs(res.events, acp.EventWarning); len(w) != 1 || !strings.Contains(string(w[0]), "events") {
		t.Errorf("the sse server the agent cannot use is reported: %s", w)
	}
	for _, l := range res.lines {
		if bytes.Contains(l, []byte("s3cr3t-token-value")) {
			t.Fatalf("a secret reached the journal: %s", l)
		}
	}
}

func TestAgentFailures(t *testing.T) {
	bin := agent(t)
	t.Run("AgentExitsMidTurn", func(t *testing.T) {
		res := runTurn(t, newHarness(t), newSandbox(t), harness.Request{Prompt: "p", Args: []string{bin, "-crash"}})
		e := last(res.events)
		if e.Type != event.RunError || e.Code != "acp-agent-exited" || res.exit != 1 {
			t.Fatalf("got exit %d, %s", res.exit, dump(res.events))
		}
		if got := text(res.events, event.TextMessageContent); got != "Working on: p" {
			t.Errorf("what the agent said before it died is kept: %q", got)
		}
	})
	t.Run("MissingAgent", func(t *testing.T) {
		res := runTurn(t, newHarness(t), newSandbox(t), harness.Request{Prompt: "p", Args: []string{"/nonexistent/agent"}})
		if e := last(res.events); e.Type != event.RunError || e.Code != "acp-agent-exited" {
			t.Fatalf("got %s", dump(res.events))
		}
	})
	t.Run("Refusal", func(t *testing.T) {
		res := runTurn(t, newHarness(t), newSandbox(t), harness.Request{Prompt: "p", Args: []string{bin, "-stop", "refusal"},
			Policy: &sandbox.Policy{Default: sandbox.Allow}})
		if e := last(res.events); e.Type != event.RunError || e.Code != acp.CodeRefusal {
			t.Fatalf("got %s", dump(res.events))
		}
	})
	t.Run("MaxTokens", func(t *testing.T) {
		res := runTurn(t, newHarness(t), newSandbox(t), harness.Request{Prompt: "p", Args: []string{bin, "-stop", "max_tokens"},
			Policy: &sandbox.Policy{Default: sandbox.Allow}})
		if e := last(res.events); e.Type != event.RunFinished || len(customs(res.events, acp.EventStop)) != 1 {
			t.Fatalf("got %s", dump(res.events))
		}
	})
	t.Run("UnknownAuthMethod", func(t *testing.T) {
		res := runTurn(t, newHarness(t), newSandbox(t), harness.Request{Prompt: "p", Args: []string{bin},
			Options: map[string]string{acp.OptionAuthMethod: "password"}})
		if e := last(res.events); e.Type != event.RunError || e.Code != "acp-auth" || !strings.Contains(e.Message, "scripted") {
			t.Fatalf("got %s", dump(res.events))
		}
	})
}

func TestHarnessCloseEndsSessions(t *testing.T) {
	bin := agent(t)
	hd := newSandbox(t)
	h := newHarness(t)
	done := make(chan result, 1)
	// Close once the turn is under way: the agent's first update is in the
	// journal (a fixed pause would race a slow start).
	going := make(chan struct{})
	var once sync.Once
	go func() {
		done <- runTurnWatch(t, h, hd, harness.Request{Run: harness.Run{RunID: "run-close"}, Prompt: "p", Args: []string{bin, "-hang"}}, func(line []byte) {
			if strings.Contains(string(line), `"corral_acp":"update"`) {
				once.Do(func() { close(going) })
			}
		})
	}()
	select {
	case <-going:
	case <-time.After(2 * time.Minute):
		t.Fatal("the turn never started")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Close(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if e := last(res.events); e.Type != event.RunError || e.Code != "acp-client-closed" {
		t.Fatalf("got %s", dump(res.events))
	}
	if _, err := h.Prepare(ctx, hd, harness.Request{Run: harness.Run{RunID: "r"}, Args: []string{bin}, RunDir: "/tmp/x"}); sandbox.CodeOf(err) != sandbox.FailedPrecondition {
		t.Errorf("a closed harness refuses new runs: %v", err)
	}
}

func TestPrepareRefuses(t *testing.T) {
	hd := newSandbox(t)
	h := newHarness(t)
	ctx := testCtx(t)
	cases := []struct {
		name string
		hd   sandbox.Handle
		req  harness.Request
		code sandbox.Code
	}{
		{"NoCommand", hd, harness.Request{RunDir: "/tmp/x"}, sandbox.InvalidArgument},
		{"NoRunDir", hd, harness.Request{Args: []string{"agent"}}, sandbox.InvalidArgument},
		{"NoWritableStdin", noStdin{hd}, harness.Request{Args: []string{"agent"}, RunDir: "/tmp/x"}, sandbox.Unimplemented},
		{"BadMCP", hd, harness.Request{Args: []string{"agent"}, RunDir: "/tmp/x", MCPServers: []sandbox.MCPServer{{Name: "x"}}}, sandbox.InvalidArgument},
		{"BadStartTimeout", hd, harness.Request{Args: []string{"agent"}, RunDir: "/tmp/x", Options: map[string]string{acp.OptionStartTimeout: "soon"}}, sandbox.InvalidArgument},
		{"BadWarm", hd, harness.Request{Args: []string{"agent"}, RunDir: "/tmp/x", Options: map[string]string{acp.OptWarm: "sometimes"}}, sandbox.InvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := h.Prepare(ctx, c.hd, c.req)
			if sandbox.CodeOf(err) != c.code {
				t.Fatalf("err = %v, want code %s", err, c.code)
			}
		})
	}
}

type noStdin struct{ sandbox.Handle }

func (n noStdin) Capabilities() sandbox.Capabilities {
	c := n.Handle.Capabilities()
	c.WritableStdin = false
	return c
}

// saveFixture keeps a run's journal as a translator fixture (with the
// workspace's real path replaced, so it is the same on every machine),
// with -update.
func saveFixture(t *testing.T, name string, res result) {
	t.Helper()
	if !*update {
		return
	}
	var b bytes.Buffer
	for _, l := range res.lines {
		b.Write(bytes.ReplaceAll(l, []byte(res.root), []byte(fixtureRoot)))
		b.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join("testdata", name+".journal.ndjson"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("testdata", name+".exit"), []byte(fmt.Sprintln(res.exit)), 0o644); err != nil {
		t.Fatal(err)
	}
}

const fixtureRoot = "/srv/workspace"

// TestModelPerRun: a run's model (harness.Request.Model) is selected in
// the agent's session the way the agent offers models — its config option
// of category "model" or session/set_model — and the turn runs with it; a
// model it does not offer, or an agent with no choice, fails the run before
// the prompt, naming what it offers.
func TestModelPerRun(t *testing.T) {
	bin := agent(t)
	for _, tc := range []struct {
		name  string
		args  []string
		model string
		want  string // in the text, or in the error
		fails bool
	}{
		{"ConfigOption", []string{"-models", "small,large"}, "large", "(model: large)", false},
		{"SetModel", []string{"-models", "small,large", "-model-via", "models"}, "large", "(model: large)", false},
		{"DefaultKept", []string{"-models", "small,large"}, "", "(model: small)", false},
		{"NotOffered", []string{"-models", "small,large"}, "huge", `the agent does not offer the model "huge" (it offers: small, large)`, true},
		{"NotOfferedSetModel", []string{"-models", "small", "-model-via", "models"}, "huge", `it offers: small`, true},
		{"NoChoice", nil, "large", "offers no choice of model", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runTurn(t, newHarness(t), newSandbox(t), harness.Request{Prompt: "p", Model: tc.model,
				Args: append([]string{bin}, tc.args...), Policy: &sandbox.Policy{Default: sandbox.Allow}})
			e := last(res.events)
			if tc.fails {
				if e.Type != event.RunError || e.Code != "acp-model" || !strings.Contains(e.Message, tc.want) {
					t.Fatalf("want RUN_ERROR acp-model %q; got %s", tc.want, dump(res.events))
				}
				if got := text(res.events, event.TextMessageContent); got != "" {
					t.Errorf("the prompt ran: %q", got)
				}
				return
			}
			if e.Type != event.RunFinished || !strings.Contains(text(res.events, event.TextMessageContent), tc.want) {
				t.Fatalf("want %q in the text; got %s", tc.want, dump(res.events))
			}
		})
	}
}
