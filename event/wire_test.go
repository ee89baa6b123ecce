package event_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/d10ffeed/corral/event"
)

// TestWireShape: the JSON of each event is AG-UI 1.0's shape (required
// fields present, corral's own fields in metadata), and decodes back to the
// same event; logs written before (top-level exitCode, isError, a
// RUN_ERROR's threadId and runId) still decode.
func TestWireShape(t *testing.T) {
	zero, three := 0, 3
	cases := []struct {
		ev   event.Event
		want string
	}{
		{event.Event{Type: event.RunFinished, ThreadID: "t", RunID: "r", ExitCode: &zero},
			`{"type":"RUN_FINISHED","threadId":"t","runId":"r","metadata":{"exitCode":0}}`},
		{event.Event{Type: event.RunFinished, ThreadID: "t", RunID: "r", ExitCode: &zero, Outcome: &event.Outcome{Type: event.OutcomeInterrupt, Interrupts: []event.Interrupt{{ID: "a1", Reason: "approval"}}}},
			`{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[{"id":"a1","reason":"approval"}]},"metadata":{"exitCode":0}}`},
		{event.Event{Type: event.RunError, ThreadID: "t", RunID: "r", Message: "boom", Code: "journal", ExitCode: &three},
			`{"type":"RUN_ERROR","message":"boom","code":"journal","metadata":{"exitCode":3,"threadId":"t","runId":"r"}}`},
		{event.Event{Type: event.RunError},
			`{"type":"RUN_ERROR","message":""}`},
		{event.Event{Type: event.ToolCallResult, ToolCallID: "c", MessageID: "m", IsError: true},
			`{"type":"TOOL_CALL_RESULT","messageId":"m","toolCallId":"c","content":"","metadata":{"isError":true}}`},
		{event.Event{Type: event.TextMessageContent, MessageID: "m"},
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":""}`},
		{event.Event{Type: event.ReasoningMessageStart, MessageID: "m"},
			`{"type":"REASONING_MESSAGE_START","messageId":"m","role":"reasoning"}`},
		{event.Event{Type: event.Custom, Name: "x"},
			`{"type":"CUSTOM","name":"x","value":null}`},
	}
	for _, c := range cases {
		if got := string(c.ev.Marshal()); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.ev.Type, got, c.want)
		}
		back, err := event.Unmarshal(c.ev.Marshal())
		if err != nil || !reflect.DeepEqual(back, c.ev) {
			t.Errorf("%s does not decode back: %+v (%v)", c.ev.Type, back, err)
		}
	}
	old, err := event.Unmarshal([]byte(`{"type":"RUN_ERROR","threadId":"t","runId":"r","message":"m","code":"cancelled","exitCode":3}`))
	if err != nil || old.ThreadID != "t" || old.RunID != "r" || old.ExitCode == nil || *old.ExitCode != 3 || !old.Cancelled() {
		t.Errorf("an old RUN_ERROR decodes as %+v (%v)", old, err)
	}
	var v map[string]any
	_ = json.Unmarshal(event.Event{Type: event.RunFinished, Outcome: &event.Outcome{Type: event.OutcomeCancelled}}.Marshal(), &v)
	if o, _ := v["outcome"].(map[string]any); o["type"] != "cancelled" {
		t.Errorf("cancelled outcome encodes as %v", v)
	}
}
