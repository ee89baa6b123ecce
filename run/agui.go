package run

import (
	"encoding/json"
	"slices"

	"github.com/d10ffeed/corral/event"
)

// aguiState follows what a run's events left open, and the approvals it
// asked for, so that the run ends the way AG-UI 1.0 requires whatever path
// ended it: a RUN_FINISHED closes nothing implicitly (@ag-ui/client's
// verifyEvents rejects one while a message, a reasoning span or a tool
// call is open), and a run that asked for approvals ends with the
// interrupt outcome (answered by the thread's next run). It sees every
// event the driver emits, replayed or new, so a takeover derives the same
// closing events.
type aguiState struct {
	text, reasoningMsg, spans, tools []string // open, in opening order
	interrupts                       []event.Interrupt
}

func (s *aguiState) see(e event.Event) {
	add := func(l *[]string, id string) {
		if id != "" && !slices.Contains(*l, id) {
			*l = append(*l, id)
		}
	}
	del := func(l *[]string, id string) {
		if i := slices.Index(*l, id); i >= 0 {
			*l = slices.Delete(*l, i, i+1)
		}
	}
	switch e.Type {
	case event.TextMessageStart:
		add(&s.text, e.MessageID)
	case event.TextMessageEnd:
		del(&s.text, e.MessageID)
	case event.ReasoningMessageStart:
		add(&s.reasoningMsg, e.MessageID)
	case event.ReasoningMessageEnd:
		del(&s.reasoningMsg, e.MessageID)
	case event.ReasoningStart:
		add(&s.spans, e.MessageID)
	case event.ReasoningEnd:
		del(&s.spans, e.MessageID)
	case event.ToolCallStart:
		add(&s.tools, e.ToolCallID)
	case event.ToolCallEnd:
		del(&s.tools, e.ToolCallID)
	case event.Custom:
		if e.Name == event.ApprovalAnswered {
			// Settled during the turn: not something the next run answers.
			var a event.ApprovalAnswer
			if json.Unmarshal(e.Value, &a) == nil {
				s.interrupts = slices.DeleteFunc(s.interrupts, func(i event.Interrupt) bool { return i.ID == a.ApprovalID })
			}
			return
		}
		if e.Name != event.ApprovalRequested {
			return
		}
		var a event.Approval
		if json.Unmarshal(e.Value, &a) != nil || a.ID == "" {
			return
		}
		if slices.ContainsFunc(s.interrupts, func(i event.Interrupt) bool { return i.ID == a.ID }) {
			return
		}
		msg := a.Title
		if msg == "" {
			msg = a.Kind + " " + a.Target
		}
		s.interrupts = append(s.interrupts, event.Interrupt{ID: a.ID, Reason: "approval", Message: msg})
	}
}

// closing returns the events that close what is open, innermost first.
func (s *aguiState) closing() []event.Event {
	var out []event.Event
	for _, id := range slices.Backward(s.text) {
		out = append(out, event.Event{Type: event.TextMessageEnd, MessageID: id})
	}
	for _, id := range slices.Backward(s.reasoningMsg) {
		out = append(out, event.Event{Type: event.ReasoningMessageEnd, MessageID: id})
	}
	for _, id := range slices.Backward(s.spans) {
		out = append(out, event.Event{Type: event.ReasoningEnd, MessageID: id})
	}
	for _, id := range slices.Backward(s.tools) {
		out = append(out, event.Event{Type: event.ToolCallEnd, ToolCallID: id})
	}
	return out
}

// finished completes a RUN_FINISHED: the interrupt outcome when the run
// asked for approvals and nothing else decided its outcome.
func (s *aguiState) finished(e event.Event) event.Event {
	if e.Type == event.RunFinished && e.Outcome == nil && len(s.interrupts) > 0 {
		e.Outcome = &event.Outcome{Type: event.OutcomeInterrupt, Interrupts: slices.Clone(s.interrupts)}
	}
	return e
}
