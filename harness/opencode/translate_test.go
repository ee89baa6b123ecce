package opencode

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
	"github.com/d10ffeed/corral/sandbox"
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

// fixtures: real-* were captured from opencode 1.18.33 against a scripted
// endpoint (see capture_test.go); hand-* are written by hand.
var fixtures = []struct {
	name string
	exit int
	what string
}{
	{"real-text", 0, "one text part"},
	{"real-reasoning", 0, "a reasoning part (--thinking) before the text"},
	{"real-command", 0, "a bash call with its output and exit code, then the final text"},
	{"real-command-failed", 0, "a bash call that exits non-zero: an error result"},
	{"real-write", 0, "the write tool"},
	{"real-ask", 0, "a command the policy asks about: rejected, the turn ends, approval.requested"},
	{"real-approved", 0, "the same command with its approval: it runs"},
	{"real-denied", 0, "a command a deny rule refuses: an error result, the model goes on"},
	{"real-edit-asked", 0, "a file write the policy asks about: approval.requested of kind fileWrite"},
	{"real-api-error", 1, "the model endpoint answers 400: error event, exit 1"},
	{"real-interrupted", 143, "opencode stopped during a command: tool calls are printed only when done, so none is open"},
	{"real-resume", 0, "a resumed session keeps its id"},
	{"hand-mixed", 0, "noise lines, empty parts, a tool without input, a rejected webfetch, a session change, an unknown event"},
	{"hand-error-exit-0", 0, "an error event with exit 0 still ends the run with RUN_ERROR"},
	// Server mode (option mode=server): serve-client.js's journal of
	// `opencode serve` events, captured the same way.
	{"real-server-text", 0, "server mode: text as deltas, session.started from corral.session"},
	{"real-server-reasoning", 0, "server mode: reasoning deltas, then text"},
	{"real-server-command", 0, "server mode: a bash call opened when pending, args when running, its result, then the text"},
	{"real-server-command-failed", 0, "server mode: a bash call that exits non-zero"},
	{"real-server-write", 0, "server mode: the write tool"},
	{"real-server-ask", 0, "server mode: permission.asked, the client rejects and records an ask: approval.requested"},
	{"real-server-approved", 0, "server mode: the approved command runs"},
	{"real-server-denied", 0, "server mode: a deny rule refuses the command, the model goes on"},
	{"real-server-edit-asked", 0, "server mode: a file write the policy asks about: approval.requested of kind fileWrite"},
	{"real-server-api-error", 1, "server mode: the endpoint answers 400: session.error, client exit 1"},
	{"real-server-interrupted", 143, "server mode: stopped while the command runs: the open call gets an interrupted result"},
	{"real-server-resume", 0, "server mode: a resumed session keeps its id"},
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

// checkInvariants: RUN_STARTED first, exactly one terminal event and it
// last, every tool call started once and resulted once, messages opened
// before their content and closed.
func checkInvariants(t *testing.T, evs []event.Event) {
	t.Helper()
	if len(evs) < 2 || evs[0].Type != event.RunStarted || !evs[len(evs)-1].Terminal() {
		t.Fatalf("want RUN_STARTED first and a terminal event last, got %d events", len(evs))
	}
	tools := map[string]int{}
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
				t.Errorf("%s outside tool call %s", e.Type, e.ToolCallID)
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

func TestApprovalEvent(t *testing.T) {
	for _, c := range []struct {
		tool, input string
		kind        sandbox.ApprovalKind
		target      string
	}{
		{"bash", `{"command":"make deploy"}`, sandbox.ApproveCommand, "make deploy"},
		{"write", `{"filePath":"/workspace/a.txt","content":"x"}`, sandbox.ApproveFileWrite, "/workspace/a.txt"},
		{"edit", `{"filePath":"/workspace/a.txt"}`, sandbox.ApproveFileWrite, "/workspace/a.txt"},
		{"webfetch", `{"url":"https://example.com/"}`, sandbox.ApproveNetwork, "https://example.com/"},
		{"task", `{"prompt":"x"}`, sandbox.ApproveTool, "task"},
		{"bash", `not json`, sandbox.ApproveTool, "bash"},
	} {
		e := approval(c.tool, json.RawMessage(c.input))
		var a event.Approval
		if err := json.Unmarshal(e.Value, &a); err != nil {
			t.Fatal(err)
		}
		if e.Name != event.ApprovalRequested || a.ID != sandbox.ApprovalID(Name, c.kind, c.target) || a.Kind != string(c.kind) || a.Target != c.target || a.Title == "" {
			t.Errorf("%s %s: %+v", c.tool, c.input, a)
		}
	}
}

func FuzzTranslator(f *testing.F) {
	for _, fx := range fixtures {
		if b, err := os.ReadFile(filepath.Join("testdata", fx.name+".jsonl")); err == nil {
			f.Add(b, fx.exit)
		}
	}
	f.Add([]byte(`{"type":"tool_use","part":{"tool":"bash","state":{"status":"error","error":"rejected permission","input":{"command":1}}}}`+"\n\xff{"), 0)
	f.Add([]byte(`{"type":"error","error":null}`+"\n"+`{"type":"text","part":null}`), 3)
	f.Add([]byte(`{"type":"corral.client","properties":{}}`+"\n"+`{"type":"message.part.delta","properties":{"partID":"p","field":"text","delta":"x"}}`+"\n"+
		`{"type":"message.part.updated","properties":{"part":{"type":"tool","callID":"c","state":{"status":"error","input":[1]}}}}`+"\n"+
		`{"type":"corral.permission","properties":{"decision":"ask","tool":null}}`+"\n"+`{"type":"session.error","properties":{"error":null}}`), 0)
	f.Add([]byte(`{"type":"corral.client"}`+"\n"+`{"type":"message.part.updated","properties":{"part":{"id":"p","type":"text","text":"ab","time":{"end":1}}}}`+"\n"+
		`{"type":"message.part.delta","properties":{"partID":"p","field":"text","delta":"c"}}`+"\n"+`{"type":"corral.permission","properties":[]}`), 0)
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
