package claudecode_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/claudecode"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden.json files")

// fixtures are the stream-json files in testdata and the exit code each
// run ended with. real-* are captures of the real CLI against the fake
// model (TestRecordCaptures); hand-* are written by hand.
var fixtures = []struct {
	name string
	exit int
}{
	{"real-tool-call", 0},
	{"real-policy", 0},
	{"real-is-error", 1},
	{"real-no-partial", 0},
	{"real-write", 0},
	{"hand-edits", 0},
	{"hand-interrupted", 137},
	{"hand-subagent", 0},
	{"hand-noise", 0},
	{"hand-max-turns", 1},
	{"hand-resume-failed", 0},
	{"hand-exit-after-success", 2},
}

var testRun = harness.Run{RunID: "run-1", ThreadID: "thread-1"}

// translate runs a whole journal through a fresh translator.
func translate(t testing.TB, data []byte, exit int) []event.Event {
	t.Helper()
	tr := claudecode.Harness{}.Translator(testRun)
	out := tr.Begin()
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 4<<20), 4<<20)
	for sc.Scan() {
		out = append(out, tr.Line(sc.Bytes())...)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return append(out, tr.End(exit)...)
}

func encode(evs []event.Event) []byte {
	var b bytes.Buffer
	b.WriteString("[\n")
	for i, e := range evs {
		b.Write(e.Marshal())
		if i < len(evs)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]\n")
	return b.Bytes()
}

func TestGolden(t *testing.T) {
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", f.name+".ndjson"))
			if err != nil {
				t.Fatal(err)
			}
			evs := translate(t, data, f.exit)
			got := encode(evs)
			if again := encode(translate(t, data, f.exit)); !bytes.Equal(got, again) {
				t.Fatal("two translations of the same journal differ")
			}
			checkInvariants(t, evs)
			golden := filepath.Join("testdata", f.name+".golden.json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("events differ from %s (run with -update to accept):\n%s", golden, got)
			}
		})
	}
}

// checkInvariants asserts what holds for every translation: RUN_STARTED
// first, exactly one terminal event and it is last, blocks opened before
// use and closed once, every tool call started once and given exactly one
// result.
func checkInvariants(t testing.TB, evs []event.Event) {
	t.Helper()
	if len(evs) < 2 || evs[0].Type != event.RunStarted {
		t.Fatalf("the first event is not RUN_STARTED: %v", evs)
	}
	for i, e := range evs {
		if e.Terminal() != (i == len(evs)-1) {
			t.Fatalf("event %d (%s): terminal events must be exactly the last", i, e.Type)
		}
	}
	open := map[string]event.Type{}
	calls := map[string]string{} // id → state: started, ended, result
	for i, e := range evs {
		switch e.Type {
		case event.ReasoningStart, event.ReasoningEnd:
			// the span around a reasoning message (same id): checked as the message
		case event.TextMessageStart, event.ReasoningMessageStart:
			if _, dup := open[e.MessageID]; dup || e.MessageID == "" {
				t.Fatalf("event %d: %s for message %q already open", i, e.Type, e.MessageID)
			}
			open[e.MessageID] = e.Type
		case event.TextMessageContent, event.ReasoningContent:
			if open[e.MessageID] == "" {
				t.Fatalf("event %d: content for message %q that is not open", i, e.MessageID)
			}
		case event.TextMessageEnd, event.ReasoningMessageEnd:
			if open[e.MessageID] == "" {
				t.Fatalf("event %d: end for message %q that is not open", i, e.MessageID)
			}
			delete(open, e.MessageID)
		case event.ToolCallStart:
			if calls[e.ToolCallID] != "" || e.ToolCallName == "" {
				t.Fatalf("event %d: tool call %q started twice or unnamed", i, e.ToolCallID)
			}
			calls[e.ToolCallID] = "started"
		case event.ToolCallArgs:
			if calls[e.ToolCallID] != "started" {
				t.Fatalf("event %d: args for tool call %q in state %q", i, e.ToolCallID, calls[e.ToolCallID])
			}
		case event.ToolCallEnd:
			if calls[e.ToolCallID] != "started" {
				t.Fatalf("event %d: end for tool call %q in state %q", i, e.ToolCallID, calls[e.ToolCallID])
			}
			calls[e.ToolCallID] = "ended"
		case event.ToolCallResult:
			if calls[e.ToolCallID] != "ended" || e.MessageID == "" {
				t.Fatalf("event %d: result for tool call %q in state %q", i, e.ToolCallID, calls[e.ToolCallID])
			}
			calls[e.ToolCallID] = "result"
		}
	}
	if len(open) > 0 {
		t.Fatalf("messages left open: %v", open)
	}
	for id, st := range calls {
		if st != "result" {
			t.Fatalf("tool call %q ended in state %q, without a result", id, st)
		}
	}
}

func load(t *testing.T, name string, exit int) []event.Event {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	return translate(t, data, exit)
}

func collectText(evs []event.Event, typ event.Type) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type == typ {
			b.WriteString(e.Delta)
		}
	}
	return b.String()
}

type toolCall struct {
	name, args, result string
	isError            bool
}

func toolCalls(evs []event.Event) (order []string, calls map[string]*toolCall) {
	calls = map[string]*toolCall{}
	for _, e := range evs {
		switch e.Type {
		case event.ToolCallStart:
			order = append(order, e.ToolCallID)
			calls[e.ToolCallID] = &toolCall{name: e.ToolCallName}
		case event.ToolCallArgs:
			calls[e.ToolCallID].args += e.Delta
		case event.ToolCallResult:
			calls[e.ToolCallID].result, calls[e.ToolCallID].isError = e.Content, e.IsError
		}
	}
	return order, calls
}

func custom(evs []event.Event, name string) []json.RawMessage {
	var out []json.RawMessage
	for _, e := range evs {
		if e.Type == event.Custom && e.Name == name {
			out = append(out, e.Value)
		}
	}
	return out
}

// TestFixtureMeaning spells out what each fixture must translate to,
// beyond the golden bytes.
func TestFixtureMeaning(t *testing.T) {
	t.Run("tool call with its result, streamed text and reasoning", func(t *testing.T) {
		evs := load(t, "real-tool-call", 0)
		order, calls := toolCalls(evs)
		if len(order) != 1 || calls[order[0]].name != "Bash" || calls[order[0]].args != `{"command":"echo hello > made.txt"}` || calls[order[0]].isError {
			t.Errorf("tool calls %v %+v", order, calls[order[0]])
		}
		if got := collectText(evs, event.TextMessageContent); got != "Done: made.txt holds hello." {
			t.Errorf("text %q", got)
		}
		if got := collectText(evs, event.ReasoningContent); got != "I will create the file." {
			t.Errorf("reasoning %q", got)
		}
		if len(custom(evs, event.SessionStarted)) != 1 || evs[len(evs)-1].Type != event.RunFinished {
			t.Errorf("session events %d, last %s", len(custom(evs, event.SessionStarted)), evs[len(evs)-1].Type)
		}
	})
	t.Run("denied commands and an approval request", func(t *testing.T) {
		evs := load(t, "real-policy", 0)
		order, calls := toolCalls(evs)
		if len(order) != 3 {
			t.Fatalf("%d tool calls", len(order))
		}
		for _, id := range order {
			if !calls[id].isError {
				t.Errorf("call %s %+v was not denied", id, calls[id])
			}
		}
		as := custom(evs, event.ApprovalRequested)
		if len(as) != 1 {
			t.Fatalf("%d approval requests", len(as))
		}
		var a event.Approval
		_ = json.Unmarshal(as[0], &a)
		if a.ID != "claude-code:command:curl -s http://example.invalid/" || a.Kind != "command" || a.Target != "curl -s http://example.invalid/" {
			t.Errorf("approval %+v", a)
		}
	})
	t.Run("success with is_error is a run error", func(t *testing.T) {
		evs := load(t, "real-is-error", 1)
		last := evs[len(evs)-1]
		if last.Type != event.RunError || last.Code != "agent_error" || !strings.Contains(last.Message, "no-such-model") && !strings.Contains(last.Message, "model") || last.ExitCode == nil || *last.ExitCode != 1 {
			t.Errorf("last event %+v", last)
		}
		for _, e := range evs {
			if e.Type == event.RunFinished {
				t.Error("RUN_FINISHED for an error result")
			}
		}
	})
	t.Run("whole blocks without partial messages", func(t *testing.T) {
		evs := load(t, "real-no-partial", 0)
		if got := collectText(evs, event.TextMessageContent); got != "Hello from the fake model." {
			t.Errorf("text %q", got)
		}
		if got := collectText(evs, event.ReasoningContent); got != "Short question, short answer." {
			t.Errorf("reasoning %q", got)
		}
	})
	t.Run("interrupted tool calls", func(t *testing.T) {
		evs := load(t, "hand-interrupted", 137)
		order, calls := toolCalls(evs)
		if len(order) != 2 {
			t.Fatalf("calls %v", order)
		}
		for _, id := range order {
			if c := calls[id]; c.result != `{"status":"interrupted"}` || !c.isError {
				t.Errorf("call %s: %+v", id, c)
			}
		}
		if last := evs[len(evs)-1]; last.Type != event.RunError || last.Code != "exit" || *last.ExitCode != 137 {
			t.Errorf("last %+v", last)
		}
	})
	t.Run("sub-agent lines are skipped", func(t *testing.T) {
		evs := load(t, "hand-subagent", 0)
		order, calls := toolCalls(evs)
		if len(order) != 1 || calls["toolu_task"] == nil || calls["toolu_task"].result != "There is one file:\nREADME.md\n"+`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}` {
			t.Errorf("calls %v %+v", order, calls["toolu_task"])
		}
		if strings.Contains(collectText(evs, event.TextMessageContent), "child") {
			t.Error("a sub-agent's text came through")
		}
	})
	t.Run("noise is ignored", func(t *testing.T) {
		evs := load(t, "hand-noise", 0)
		if got := collectText(evs, event.TextMessageContent); got != "Then answer." {
			t.Errorf("text %q", got)
		}
		if n := len(custom(evs, event.SessionStarted)); n != 1 {
			t.Errorf("%d session.started events for one session", n)
		}
	})
	t.Run("max turns", func(t *testing.T) {
		evs := load(t, "hand-max-turns", 1)
		last := evs[len(evs)-1]
		if last.Type != event.RunError || last.Code != "error_max_turns" || last.Message != "Reached the maximum number of turns (1)" {
			t.Errorf("last %+v", last)
		}
	})
	t.Run("resume failed", func(t *testing.T) {
		evs := load(t, "hand-resume-failed", 0)
		rf := custom(evs, claudecode.ResumeFailed)
		if len(rf) != 1 || !strings.Contains(string(rf[0]), "0f6c1a2e-1111-4222-8333-944455556666") {
			t.Errorf("resume_failed events %s", rf)
		}
		ss := custom(evs, event.SessionStarted)
		if len(ss) != 1 || !strings.Contains(string(ss[0]), "7d0b3c4e") {
			t.Errorf("session.started %s", ss)
		}
	})
	t.Run("non-zero exit after a success", func(t *testing.T) {
		evs := load(t, "hand-exit-after-success", 2)
		if last := evs[len(evs)-1]; last.Type != event.RunError || last.Code != "exit" || *last.ExitCode != 2 {
			t.Errorf("last %+v", last)
		}
	})
}

// FuzzTranslator feeds arbitrary journal lines: the translator must never
// panic, and every translation must keep the invariants.
func FuzzTranslator(f *testing.F) {
	for _, fx := range fixtures {
		data, err := os.ReadFile(filepath.Join("testdata", fx.name+".ndjson"))
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range bytes.Split(data, []byte("\n")) {
			f.Add(l, uint8(fx.exit))
		}
		f.Add(data, uint8(fx.exit))
	}
	f.Add([]byte(`{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"x","name":"Bash"}}}`+"\n"+`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"x","is_error":true,"content":"corral-approval: {\"approvalId\":\"a\"}"}]}}`), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, exit uint8) {
		checkInvariants(t, translate(t, data, int(exit)))
	})
}
