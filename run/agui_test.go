package run

import (
	"reflect"
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/store"
)

// TestAGUIStateClosesAndInterrupts: before RUN_FINISHED, what the events
// left open is closed (innermost first), and a run that asked for
// approvals ends with the interrupt outcome, one interrupt per approval id.
func TestAGUIStateClosesAndInterrupts(t *testing.T) {
	var s aguiState
	for _, e := range []event.Event{
		{Type: event.TextMessageStart, MessageID: "m1"},
		{Type: event.TextMessageEnd, MessageID: "m1"},
		{Type: event.ToolCallStart, ToolCallID: "c1"},
		event.CustomEvent(event.ApprovalRequested, event.Approval{ID: "a1", Kind: "command", Target: "rm -rf /"}),
		event.CustomEvent(event.ApprovalRequested, event.Approval{ID: "a1", Kind: "command", Target: "rm -rf /"}),
		{Type: event.ReasoningStart, MessageID: "r1"},
		{Type: event.ReasoningMessageStart, MessageID: "r1"},
		{Type: event.TextMessageStart, MessageID: "m2"},
	} {
		s.see(e)
	}
	want := []event.Event{
		{Type: event.TextMessageEnd, MessageID: "m2"},
		{Type: event.ReasoningMessageEnd, MessageID: "r1"},
		{Type: event.ReasoningEnd, MessageID: "r1"},
		{Type: event.ToolCallEnd, ToolCallID: "c1"},
	}
	if got := s.closing(); !reflect.DeepEqual(got, want) {
		t.Errorf("closing = %+v, want %+v", got, want)
	}
	fin := s.finished(event.Event{Type: event.RunFinished})
	if fin.Outcome == nil || fin.Outcome.Type != event.OutcomeInterrupt || len(fin.Outcome.Interrupts) != 1 ||
		fin.Outcome.Interrupts[0] != (event.Interrupt{ID: "a1", Reason: "approval", Message: "command rm -rf /"}) {
		t.Errorf("finished = %+v, want the interrupt outcome with a1 once", fin.Outcome)
	}
	cancelled := s.finished(cancelEvent(store.Run{ID: "r", ThreadID: "t"}, nil))
	if cancelled.Outcome.Type != event.OutcomeCancelled {
		t.Errorf("a cancel's outcome became %q", cancelled.Outcome.Type)
	}
	t.Logf("%d open blocks closed, %d interrupt from 2 approval events", len(want), len(fin.Outcome.Interrupts))

	// A request answered live during the turn does not interrupt the run.
	s.see(event.CustomEvent(event.ApprovalRequested, event.Approval{ID: "a2", Kind: "command", Target: "make"}))
	s.see(event.CustomEvent(event.ApprovalAnswered, event.ApprovalAnswer{ApprovalID: "a2", Allowed: true, By: "answer"}))
	s.see(event.CustomEvent(event.ApprovalAnswered, event.ApprovalAnswer{ApprovalID: "a1", Allowed: false, By: "deadline"}))
	if fin := s.finished(event.Event{Type: event.RunFinished}); fin.Outcome != nil {
		t.Errorf("every request was settled live, yet the run ends with outcome %+v", fin.Outcome)
	}
}
