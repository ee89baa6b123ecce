package codex

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/harnesstest"
)

var update = flag.Bool("update", false, "rewrite the golden event files in testdata")

var testRun = harness.Run{RunID: "run-1", ThreadID: "thread-1"}

// translate feeds a whole journal (one event per line) and the exit code
// through a fresh translator.
func translate(journal []byte, exit int) []event.Event {
	return harnesstest.Translate(Harness{}, testRun, journal, exit)
}

// fixtures: real-* were captured from codex 0.171.0 against a scripted
// endpoint (see capture_test.go); hand-* are written by hand.
var fixtures = []harnesstest.Fixture{
	{Name: "real-text", Exit: 0, What: "thread start, a missing-metadata error item, one agent message, turn completed"},
	{Name: "real-reasoning", Exit: 0, What: "a reasoning item before the message"},
	{Name: "real-command", Exit: 0, What: "a command execution with its output and exit code, then the final text"},
	{Name: "real-command-failed", Exit: 0, What: "a command that exits non-zero: an error result"},
	{Name: "real-file-change", Exit: 0, What: "apply_patch reported as a file_change item"},
	{Name: "real-read-only", Exit: 0, What: "a write refused by the read-only sandbox: a failed command"},
	{Name: "real-forbidden", Exit: 0, What: "a command refused by an execpolicy rule: codex reports no item for it"},
	{Name: "real-reconnect", Exit: 0, What: "transient Reconnecting errors, then a successful turn"},
	{Name: "real-turn-failed", Exit: 1, What: "an API error: error event, turn.failed, exit 1"},
	{Name: "real-interrupted", Exit: 143, What: "codex killed while a command runs: the open call is closed as interrupted"},
	{Name: "real-resume", Exit: 0, What: "a resumed thread: thread.started repeats the previous thread id"},
	{Name: "app-text", Exit: 0, What: "warm (app-server): thread/turn notifications, a metadata warning, agent message deltas, turn/completed"},
	{Name: "app-reasoning", Exit: 0, What: "warm: reasoning summary deltas before the message"},
	{Name: "app-command", Exit: 0, What: "warm: a command execution with its output and exit code, then the final text"},
	{Name: "app-command-failed", Exit: 0, What: "warm: a command that exits non-zero: an error result"},
	{Name: "app-file-change", Exit: 0, What: "warm: apply_patch reported as a fileChange item"},
	{Name: "app-turn-failed", Exit: 0, What: "warm: an API error: error notification, turn/completed failed (the client exits 0; the translator fails the run)"},
	{Name: "app-interrupted", Exit: 143, What: "warm: the turn cancelled while a command runs: the open call is closed as interrupted"},
	{Name: "hand-streaming", Exit: 0, What: "text and reasoning growing across item.updated, a type change, and noise lines"},
	{Name: "hand-tools", Exit: 0, What: "mcp, web search, todo list, a declined command and a completion without a start"},
	{Name: "hand-exit-without-turn", Exit: 1, What: "a non-zero exit after only transient errors"},
}

func TestGolden(t *testing.T) { harnesstest.Golden(t, Harness{}, testRun, fixtures, *update) }

func TestTransientErrorsAreNotFatal(t *testing.T) {
	in := `{"type":"thread.started","thread_id":"t1"}
{"type":"turn.started"}
{"type":"error","message":"Reconnecting... 1/5 (stream disconnected)"}
{"type":"error","message":"Reconnecting... 2/5 (stream disconnected)"}
{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"ok"}}
{"type":"turn.completed","usage":{}}`
	evs := translate([]byte(in), 0)
	last := evs[len(evs)-1]
	if last.Type != event.RunFinished {
		t.Fatalf("last event %s, want RUN_FINISHED", last.Type)
	}
	n := 0
	for _, e := range evs {
		if e.Type == event.Custom && e.Name == ErrorEvent {
			n++
		}
		if e.Type == event.RunError {
			t.Errorf("a transient error became RUN_ERROR: %s", e.Message)
		}
	}
	if n != 2 {
		t.Errorf("%d %s events, want 2", n, ErrorEvent)
	}
}

func TestSessionStarted(t *testing.T) {
	evs := translate([]byte(`{"type":"thread.started","thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}`), 0)
	var s event.Session
	if evs[1].Name != event.SessionStarted || json.Unmarshal(evs[1].Value, &s) != nil || s.ID != "0199a213-81c0-7800-8aa1-bbab2a035a53" {
		t.Fatalf("event %+v", evs[1])
	}
}

func TestUnwrapShell(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`/bin/bash -lc 'echo hello > made.txt'`, `echo hello > made.txt`},
		{`bash -lc 'echo '"'"'quoted'"'"''`, `echo 'quoted'`},
		{`/bin/bash -lc "echo \"hi\""`, `echo "hi"`},
		{`/bin/bash -lc ls`, `ls`},
		{`/bin/bash -lc 'a' 'b'`, `/bin/bash -lc 'a' 'b'`},
		{`/bin/bash -lc "echo $HOME"`, `/bin/bash -lc "echo $HOME"`},
		{`/bin/bash -lc 'unterminated`, `/bin/bash -lc 'unterminated`},
		{`python3 -c 'print(1)'`, `python3 -c 'print(1)'`},
		{`ls -la`, `ls -la`},
	} {
		if got := unwrapShell(c.in); got != c.want {
			t.Errorf("unwrapShell(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func FuzzTranslator(f *testing.F) {
	for _, fx := range fixtures {
		if b, err := os.ReadFile(filepath.Join("testdata", fx.Name+".jsonl")); err == nil {
			f.Add(b, fx.Exit)
		}
	}
	f.Add([]byte(`{"type":"item.started","item":{"id":"x","type":"agent_message","text":"a"}}`+"\n"+`{"type":"item.started","item":{"id":"x","type":"command_execution"}}`), 0)
	f.Add([]byte(`{"type":"item.completed","item":null}`+"\n"+`{"type":"turn.failed","error":null}`+"\n\xff{"), 2)
	f.Fuzz(func(t *testing.T, journal []byte, exit int) {
		evs := translate(journal, exit)
		harnesstest.Invariants(t, evs)
		for _, e := range evs {
			_ = e.Marshal()
		}
		if !reflect.DeepEqual(evs, translate(journal, exit)) {
			t.Fatal("not deterministic")
		}
	})
}

func TestMCPAskBecomesApproval(t *testing.T) {
	refused := func(id, server string) string {
		return `{"type":"item.completed","item":{"id":"` + id + `","type":"mcp_tool_call","server":"` + server + `","tool":"t","arguments":{},"status":"failed","error":{"message":"MCP tool call requires approval, but approval policy is never"}}}`
	}
	tr := Harness{}.Translator(harness.Run{RunID: "r", ThreadID: "th"})
	var approvals []string
	for _, l := range []string{
		`{"type":"corral.mcp_ask","servers":["docs"]}`,
		refused("i1", "docs"),
		refused("i2", "docs"),  // the same server again: asked once
		refused("i3", "other"), // not asked about (the policy denies it): no approval
	} {
		for _, e := range tr.Line([]byte(l)) {
			if e.Type == event.Custom && e.Name == event.ApprovalRequested {
				var a event.Approval
				if err := json.Unmarshal(e.Value, &a); err != nil {
					t.Fatal(err)
				}
				approvals = append(approvals, a.ID)
			}
		}
	}
	if len(approvals) != 1 || approvals[0] != "codex:tool:mcp__docs" {
		t.Errorf("approvals %q, want one for codex:tool:mcp__docs", approvals)
	}
}

// TestAppTurnRefused: a warm turn whose turn/start request codex answers
// with an error ends with RUN_ERROR carrying its message.
func TestAppTurnRefused(t *testing.T) {
	in := `{"method":"corral/resumeFailed","params":{}}
{"error":{"code":-32600,"message":"thread not found"},"id":"corral-turn-1"}`
	evs := translate([]byte(in), 1)
	last := evs[len(evs)-1]
	if last.Type != event.RunError || last.Message != "codex refused the turn: thread not found" {
		t.Fatalf("last event %s %q, want RUN_ERROR for the refused turn", last.Type, last.Message)
	}
	harnesstest.Invariants(t, evs)
}
