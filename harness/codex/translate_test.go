package codex

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
)

var update = flag.Bool("update", false, "rewrite the golden event files in testdata")

var testRun = harness.Run{RunID: "run-1", ThreadID: "thread-1"}

// translate feeds a whole journal (one event per line) and the exit code
// through a fresh translator.
func translate(journal []byte, exit int) []event.Event {
	tr := Harness{}.Translator(testRun)
	evs := tr.Begin()
	sc := bufio.NewScanner(bytes.NewReader(journal))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		evs = append(evs, tr.Line(sc.Bytes())...)
	}
	return append(evs, tr.End(exit)...)
}

// fixtures: real-* were captured from codex 0.171.0 against a scripted
// endpoint (see capture_test.go); hand-* are written by hand.
var fixtures = []struct {
	name string
	exit int
	what string
}{
	{"real-text", 0, "thread start, a missing-metadata error item, one agent message, turn completed"},
	{"real-reasoning", 0, "a reasoning item before the message"},
	{"real-command", 0, "a command execution with its output and exit code, then the final text"},
	{"real-command-failed", 0, "a command that exits non-zero: an error result"},
	{"real-file-change", 0, "apply_patch reported as a file_change item"},
	{"real-read-only", 0, "a write refused by the read-only sandbox: a failed command"},
	{"real-forbidden", 0, "a command refused by an execpolicy rule: codex reports no item for it"},
	{"real-reconnect", 0, "transient Reconnecting errors, then a successful turn"},
	{"real-turn-failed", 1, "an API error: error event, turn.failed, exit 1"},
	{"real-interrupted", 143, "codex killed while a command runs: the open call is closed as interrupted"},
	{"real-resume", 0, "a resumed thread: thread.started repeats the previous thread id"},
	{"hand-streaming", 0, "text and reasoning growing across item.updated, a type change, and noise lines"},
	{"hand-tools", 0, "mcp, web search, todo list, a declined command and a completion without a start"},
	{"hand-exit-without-turn", 1, "a non-zero exit after only transient errors"},
}

func TestGolden(t *testing.T) {
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", f.name+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			got := translate(in, f.exit)
			checkInvariants(t, got)
			var buf bytes.Buffer
			buf.WriteString("[\n")
			for i, e := range got {
				if i > 0 {
					buf.WriteString(",\n")
				}
				buf.Write(e.Marshal())
			}
			buf.WriteString("\n]\n")
			golden := filepath.Join("testdata", f.name+".golden.json")
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("events differ from %s (%s); run go test -update and review the diff.\ngot:\n%s", golden, f.what, buf.Bytes())
			}
			if again := translate(in, f.exit); !reflect.DeepEqual(got, again) {
				t.Error("the translator is not deterministic")
			}
		})
	}
}

// checkInvariants checks what every translation must hold: RUN_STARTED
// first, exactly one terminal event and it last, every tool call started
// once and resulted once, messages opened before content and closed once.
func checkInvariants(t *testing.T, evs []event.Event) {
	t.Helper()
	if len(evs) < 2 || evs[0].Type != event.RunStarted || !evs[len(evs)-1].Terminal() {
		t.Fatalf("want RUN_STARTED first and a terminal event last, got %d events", len(evs))
	}
	tools := map[string]int{} // 1 started, 2 resulted
	msgs := map[string]bool{}
	for i, e := range evs {
		if e.Terminal() && i != len(evs)-1 {
			t.Errorf("terminal event %d is not last", i)
		}
		switch e.Type {
		case event.ToolCallStart:
			if _, dup := tools[e.ToolCallID]; dup {
				t.Errorf("tool call %s started twice", e.ToolCallID)
			}
			tools[e.ToolCallID] = 1
		case event.ToolCallArgs, event.ToolCallEnd:
			if tools[e.ToolCallID] != 1 {
				t.Errorf("%s for tool call %s outside its start and result", e.Type, e.ToolCallID)
			}
		case event.ToolCallResult:
			if tools[e.ToolCallID] != 1 {
				t.Errorf("result for tool call %s that is not open", e.ToolCallID)
			}
			tools[e.ToolCallID] = 2
		case event.TextMessageStart, event.ReasoningStart:
			if msgs[e.MessageID] {
				t.Errorf("message %s opened twice", e.MessageID)
			}
			msgs[e.MessageID] = true
		case event.TextMessageContent, event.ReasoningContent:
			if !msgs[e.MessageID] {
				t.Errorf("content for message %s that is not open", e.MessageID)
			}
		case event.TextMessageEnd, event.ReasoningEnd:
			if !msgs[e.MessageID] {
				t.Errorf("end of message %s that is not open", e.MessageID)
			}
			msgs[e.MessageID] = false
		}
	}
	for id, s := range tools {
		if s != 2 {
			t.Errorf("tool call %s has no result", id)
		}
	}
	for id, open := range msgs {
		if open {
			t.Errorf("message %s never ends", id)
		}
	}
}

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
		if b, err := os.ReadFile(filepath.Join("testdata", fx.name+".jsonl")); err == nil {
			f.Add(b, fx.exit)
		}
	}
	f.Add([]byte(`{"type":"item.started","item":{"id":"x","type":"agent_message","text":"a"}}`+"\n"+`{"type":"item.started","item":{"id":"x","type":"command_execution"}}`), 0)
	f.Add([]byte(`{"type":"item.completed","item":null}`+"\n"+`{"type":"turn.failed","error":null}`+"\n\xff{"), 2)
	f.Fuzz(func(t *testing.T, journal []byte, exit int) {
		evs := translate(journal, exit)
		checkInvariants(t, evs)
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
