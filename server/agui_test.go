package server_test

// The daemon as an AG-UI backend, checked with the official packages
// (internal/aguitest: @ag-ui/core's schemas, @ag-ui/client's enforceEvents,
// verifyEvents and HttpAgent).

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/internal/aguitest"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// sseFrames returns every data payload of a stream, as an AG-UI client
// reads them (whatever their SSE event name).
func sseFrames(evs []sse) []string {
	var out []string
	for _, e := range evs {
		if e.Data != "" {
			out = append(out, e.Data)
		}
	}
	return out
}

// TestAGUIEventsOfEveryRunKind streams runs of every kind the daemon
// produces (output, no output with a diff, stderr only, failing,
// cancelled, asking for approval, answered) and checks every frame a
// client receives with the official schemas and every run with
// verifyEvents.
func TestAGUIEventsOfEveryRunKind(t *testing.T) {
	e := newEnv(t, envOptions{Extra: []harness.Harness{asker{}}})
	repo := testutil.BareRepo(t, map[string]string{"README.md": "a repository\n"})
	g := newEnv(t, envOptions{Workspace: &sandbox.Workspace{Source: &sandbox.Source{Git: repo}}})
	kinds := []struct {
		name, harness, prompt, thread string
		approvals                     map[string]bool
		status                        store.RunStatus
		cancel                        bool
		git                           bool // in a git workspace: the run ends with its diff
	}{
		{name: "command", prompt: fiftyLines, status: store.RunCompleted},
		{name: "no-output-diff", prompt: "echo new > f.txt", status: store.RunCompleted, git: true},
		{name: "output-diff", prompt: "echo changed; echo more >> README.md", status: store.RunCompleted, git: true},
		{name: "stderr-only", prompt: "echo oops >&2", status: store.RunCompleted},
		{name: "failing", prompt: "echo failing; exit 3", status: store.RunFailed},
		{name: "cancelled", prompt: sleeper, status: store.RunCancelled, cancel: true},
		{name: "approval", harness: "asker", prompt: "deploy", thread: "t-ask", status: store.RunCompleted},
		{name: "approval-answered", harness: "asker", prompt: "deploy", thread: "t-ask", approvals: map[string]bool{askID: true}, status: store.RunCompleted},
	}
	// What each kind's last event says, in AG-UI 1.0's terms.
	lastWant := map[string]string{
		"command":           `{"type":"RUN_FINISHED","threadId":`,
		"failing":           `"metadata":{"exitCode":3,`,
		"cancelled":         `"outcome":{"type":"cancelled"}`,
		"approval":          `"outcome":{"type":"interrupt","interrupts":[{"id":"` + askID + `","reason":"approval"`,
		"approval-answered": `"metadata":{"exitCode":0}}`,
	}
	var runs []aguitest.Run
	for _, k := range kinds {
		e := e
		if k.git {
			e = g
		}
		id := e.startJSON("", jsonBody(t, api.StartRun{Harness: k.harness, Thread: k.thread, Prompt: k.prompt, Approvals: k.approvals}))
		if k.cancel {
			e.waitLine(id, "started", time.Minute)
			if resp, body := do(t, e.URL, request{Method: "POST", Path: "/v1/runs/" + id + "/cancel"}); resp.StatusCode != http.StatusAccepted {
				t.Fatalf("cancel: %s %s", resp.Status, body)
			}
		}
		e.waitStatus(id, k.status, time.Minute)
		frames := sseFrames(streamAll(t, e, id, 0, false))
		if want := lastWant[k.name]; want != "" && !strings.Contains(frames[len(frames)-1], want) {
			t.Errorf("%s ends with %s, want it to hold %s", k.name, frames[len(frames)-1], want)
		}
		runs = append(runs, aguitest.RunOfFrames(k.name, frames))
	}
	aguitest.Require(t, runs...)
}

// postCounter counts POST /v1/runs requests and signals each.
type postCounter struct {
	next http.Handler
	seen chan struct{}
}

func (p *postCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/v1/runs" {
		select {
		case p.seen <- struct{}{}:
		default:
		}
	}
	p.next.ServeHTTP(w, r)
}

func str(s string) *string { return &s }

// TestHttpAgentAgainstTheDaemon drives the official @ag-ui/client
// HttpAgent.runAgent against POST /v1/runs, unmodified: a command run, a
// run that asks for an approval (interrupt outcome), its answer through
// RunAgentInput.resume, and a reconnect: a client that went away mid-run
// sends the same RunAgentInput again and gets the whole run, its live end
// included. Nothing the client received was stripped or rejected.
func TestHttpAgentAgainstTheDaemon(t *testing.T) {
	const tok = "agui-token"
	pc := &postCounter{seen: make(chan struct{}, 16)}
	e := newEnv(t, envOptions{Extra: []harness.Harness{asker{}}, Tokens: map[string]string{tok: ""},
		Wrap: func(h http.Handler) http.Handler { pc.next = h; return pc }})
	url := e.URL + "/v1/runs"
	gate := filepath.Join(t.TempDir(), "go")
	waiter := fmt.Sprintf("echo started; while [ ! -e %s ]; do sleep 0.02; done; echo done", sandbox.ShellQuote(gate))

	steps := aguitest.Drive(t, url, tok,
		aguitest.Step{Agent: "a", ThreadID: "t-agui", RunID: "r-agui-1", Prompt: str("echo hello from corral; exit 0"), ForwardedProps: map[string]any{"harness": "command"}},
		aguitest.Step{Agent: "ask", ThreadID: "t-agui-ask", RunID: "r-agui-ask-1", Prompt: str("deploy"), ForwardedProps: map[string]any{"harness": "asker"}},
		aguitest.Step{Agent: "ask", ThreadID: "t-agui-ask", RunID: "r-agui-ask-2", Prompt: str("deploy"), ForwardedProps: map[string]any{"harness": "asker"},
			Resume: []map[string]any{{"interruptId": askID, "status": "resolved"}}},
		aguitest.Step{Agent: "live", ThreadID: "t-agui-live", RunID: "r-agui-live", Prompt: str(waiter), AbortAfter: 3},
	)
	for len(pc.seen) > 0 {
		<-pc.seen
	}
	// The reconnect: a fresh HttpAgent sends the same input; the agent is
	// let go only once that request arrived, so the end comes live.
	go func() {
		select {
		case <-pc.seen:
			_ = os.WriteFile(gate, nil, 0o644)
		case <-time.After(2 * time.Minute): // a hang guard
		}
	}()
	steps = append(steps, aguitest.Drive(t, url, tok,
		aguitest.Step{Agent: "again", ThreadID: "t-agui-live", RunID: "r-agui-live", Prompt: str(waiter)})...)

	names := []string{"command", "approval", "resume", "aborted", "reconnect"}
	var runs []aguitest.Run
	for i, s := range steps {
		t.Logf("%s: %v (error %q)", names[i], s.Types(), s.Error)
		for _, w := range s.Warnings {
			if strings.Contains(w, "[ag-ui]") {
				t.Errorf("%s: the client warned: %s", names[i], w)
			}
		}
		if i != 3 && s.Error != "" {
			t.Errorf("%s: runAgent failed: %s", names[i], s.Error)
		}
		runs = append(runs, aguitest.Run{Name: names[i], Events: s.Events})
	}
	has := func(i int, sub string) bool {
		for _, ev := range steps[i].Events {
			if strings.Contains(string(ev), sub) {
				return true
			}
		}
		return false
	}
	if !has(0, `hello from corral`) || !has(0, `"exitCode":0`) {
		t.Errorf("the command run's text or exit code did not reach the client")
	}
	if !has(1, `"outcome":{"type":"interrupt","interrupts":[{"id":"`+askID+`"`) || len(steps[1].PendingInterrupts) != 1 {
		t.Errorf("the approval did not reach the client as an interrupt (pending %d)", len(steps[1].PendingInterrupts))
	}
	if !has(2, "ALLOWED "+askID) || len(steps[2].PendingInterrupts) != 0 {
		t.Errorf("the resume did not answer the approval (pending %d)", len(steps[2].PendingInterrupts))
	}
	if has(3, `"done`) {
		t.Errorf("the aborted client saw the run's end")
	}
	if !has(4, `started`) || !has(4, `done`) || steps[4].Types()[len(steps[4].Types())-1] != "RUN_FINISHED" {
		t.Errorf("the reconnect did not get the whole run: %v", steps[4].Types())
	}
	if n := e.runCount(); n != 4 {
		t.Errorf("%d runs, want 4 (the reconnect starts none)", n)
	}
	aguitest.Require(t, runs...)
}

// TestRunAgentInputRefusals: what corral cannot honour in a RunAgentInput
// is refused with a 400 that says why, and starts no run.
func TestRunAgentInputRefusals(t *testing.T) {
	e := newEnv(t, envOptions{})
	done := e.startJSON("", jsonBody(t, api.StartRun{Thread: "t-other", Prompt: "echo hi"}))
	e.waitStatus(done, store.RunCompleted, time.Minute)
	msgs := `"messages":[{"id":"u1","role":"user","content":"echo hi"}]`
	cases := []struct{ name, body, want string }{
		{"tools", `{"threadId":"t","runId":"r1",` + msgs + `,"tools":[{"name":"x","description":"y"}]}`, "tools is not supported"},
		{"state", `{"threadId":"t","runId":"r1",` + msgs + `,"state":{"k":1}}`, "state is not supported"},
		{"context", `{"threadId":"t","runId":"r1",` + msgs + `,"context":[{"description":"d","value":"v"}]}`, "context is not supported"},
		{"unknown prop", `{"threadId":"t","runId":"r1",` + msgs + `,"forwardedProps":{"harnes":"command"}}`, `unknown field "harnes"`},
		{"no thread", `{"runId":"r1",` + msgs + `}`, "needs threadId and runId"},
		{"bad run id", `{"threadId":"t","runId":"../x",` + msgs + `}`, "a run id is"},
		{"no user message", `{"threadId":"t","runId":"r1","messages":[{"id":"a","role":"assistant","content":"hi"}]}`, "empty prompt"},
		{"image part", `{"threadId":"t","runId":"r1","messages":[{"id":"u","role":"user","content":[{"type":"image","source":{"type":"url","value":"http://x"}}]}]}`, "text only"},
		{"bad resume", `{"threadId":"t","runId":"r1",` + msgs + `,"resume":[{"interruptId":"a","status":"maybe"}]}`, "want resolved or cancelled"},
		{"run of another thread", `{"threadId":"t","runId":"` + done + `",` + msgs + `}`, "belongs to another thread"},
	}
	before, refused := e.runCount(), 0
	for _, c := range cases {
		resp, body := do(t, e.URL, request{Method: "POST", Path: "/v1/runs", Body: c.body})
		_, msg := apiError(t, resp, body)
		if (resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusConflict) || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %s %q, want 400/409 saying %q", c.name, resp.Status, msg, c.want)
			continue
		}
		refused++
	}
	if n := e.runCount(); n != before {
		t.Errorf("%d runs started by refused inputs", n-before)
	}
	t.Logf("%d of %d unusable inputs refused with the reason; %d runs started by them", refused, len(cases), e.runCount()-before)
}
