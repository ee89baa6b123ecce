package opencode

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
	"github.com/d10ffeed/corral/sandbox"
)

var update = flag.Bool("update", false, "rewrite the golden event files in testdata")

var testRun = harness.Run{RunID: "run-1", ThreadID: "thread-1"}

// translate feeds a whole journal (one event per line) and the exit code
// through a fresh translator.
func translate(journal []byte, exit int) []event.Event {
	return harnesstest.Translate(Harness{}, testRun, journal, exit)
}

// fixtures: real-* were captured from opencode 1.18.33 against a scripted
// endpoint (see capture_test.go); hand-* are written by hand.
var fixtures = []harnesstest.Fixture{
	{Name: "real-text", Exit: 0, What: "one text part"},
	{Name: "real-reasoning", Exit: 0, What: "a reasoning part (--thinking) before the text"},
	{Name: "real-command", Exit: 0, What: "a bash call with its output and exit code, then the final text"},
	{Name: "real-command-failed", Exit: 0, What: "a bash call that exits non-zero: an error result"},
	{Name: "real-write", Exit: 0, What: "the write tool"},
	{Name: "real-ask", Exit: 0, What: "a command the policy asks about: rejected, the turn ends, approval.requested"},
	{Name: "real-approved", Exit: 0, What: "the same command with its approval: it runs"},
	{Name: "real-denied", Exit: 0, What: "a command a deny rule refuses: an error result, the model goes on"},
	{Name: "real-edit-asked", Exit: 0, What: "a file write the policy asks about: approval.requested of kind fileWrite"},
	{Name: "real-api-error", Exit: 1, What: "the model endpoint answers 400: error event, exit 1"},
	{Name: "real-interrupted", Exit: 143, What: "opencode stopped during a command: tool calls are printed only when done, so none is open"},
	{Name: "real-resume", Exit: 0, What: "a resumed session keeps its id"},
	{Name: "hand-mixed", Exit: 0, What: "noise lines, empty parts, a tool without input, a rejected webfetch, a session change, an unknown event"},
	{Name: "hand-error-exit-0", Exit: 0, What: "an error event with exit 0 still ends the run with RUN_ERROR"},
	{Name: "hand-edits", Exit: 0, What: "file.changed per editing call: edit (filePath), a failed write (none), apply_patch (the files its patch text names), bash and read (none)"},
	// Server mode (option mode=server): serve-client.js's journal of
	// `opencode serve` events, captured the same way.
	{Name: "real-server-text", Exit: 0, What: "server mode: text as deltas, session.started from corral.session"},
	{Name: "real-server-reasoning", Exit: 0, What: "server mode: reasoning deltas, then text"},
	{Name: "real-server-command", Exit: 0, What: "server mode: a bash call opened when pending, args when running, its result, then the text"},
	{Name: "real-server-command-failed", Exit: 0, What: "server mode: a bash call that exits non-zero"},
	{Name: "real-server-write", Exit: 0, What: "server mode: the write tool"},
	{Name: "real-server-ask", Exit: 0, What: "server mode: permission.asked, the client rejects and records an ask: approval.requested"},
	{Name: "real-server-approved", Exit: 0, What: "server mode: the approved command runs"},
	{Name: "real-server-denied", Exit: 0, What: "server mode: a deny rule refuses the command, the model goes on"},
	{Name: "real-server-edit-asked", Exit: 0, What: "server mode: a file write the policy asks about: approval.requested of kind fileWrite"},
	{Name: "real-server-api-error", Exit: 1, What: "server mode: the endpoint answers 400: session.error, client exit 1"},
	{Name: "real-server-interrupted", Exit: 143, What: "server mode: stopped while the command runs: the open call gets an interrupted result"},
	{Name: "real-server-resume", Exit: 0, What: "server mode: a resumed session keeps its id"},
}

func TestGolden(t *testing.T) { harnesstest.Golden(t, Harness{}, testRun, fixtures, *update) }

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
		if b, err := os.ReadFile(filepath.Join("testdata", fx.Name+".jsonl")); err == nil {
			f.Add(b, fx.Exit)
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
		harnesstest.Invariants(t, evs)
		for _, e := range evs {
			_ = e.Marshal()
		}
		if !reflect.DeepEqual(evs, translate(journal, exit)) {
			t.Fatal("not deterministic")
		}
	})
}
