package grokbuild

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
)

// Names of the CUSTOM events this harness adds.
const (
	// EventPlan carries Grok's plan (value: {"entries"}).
	EventPlan = "grok.plan"
	// EventStop carries a turn's stop reason and usage when it ended short
	// of end_turn (value: {"stopReason","usage"}).
	EventStop = "grok.stop"
)

// line is one streaming-json object; which fields are set depends on Type.
// The Codex-shaped events of older releases (thread.started, item.*,
// turn.completed, turn.failed) are read too.
type line struct {
	Type string `json:"type"`
	Data any    `json:"data"`

	ToolCallID string            `json:"toolCallId"`
	Title      *string           `json:"title"`
	Kind       string            `json:"kind"`
	ToolName   string            `json:"toolName"`
	Status     string            `json:"status"`
	RawInput   json.RawMessage   `json:"rawInput"`
	RawOutput  json.RawMessage   `json:"rawOutput"`
	Content    []json.RawMessage `json:"content"`

	Entries json.RawMessage `json:"entries"`

	StopReason string          `json:"stopReason"`
	SessionID  string          `json:"sessionId"`
	Usage      json.RawMessage `json:"usage"`
	Message    string          `json:"message"`

	ThreadID string          `json:"thread_id"`
	Item     *legacyItem     `json:"item"`
	Error    json.RawMessage `json:"error"`
}

type legacyItem struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Text string `json:"text"`
}

type tool struct {
	title    string
	argsSent bool
	done     bool
}

type translator struct {
	run harness.Run
	ids event.IDs

	blocks     event.Blocks // the open text message and reasoning
	tools      map[string]*tool
	order      []string
	legacyText map[string]string // item id → its text already sent

	session    string
	ended      bool
	stopReason string
	usage      json.RawMessage
	errMsg     string
}

func newTranslator(run harness.Run) *translator {
	t := &translator{run: run, ids: event.IDs{RunID: run.RunID}, tools: map[string]*tool{}, legacyText: map[string]string{}}
	t.blocks.IDs = &t.ids
	return t
}

func (t *translator) Begin() []event.Event {
	return []event.Event{{Type: event.RunStarted, ThreadID: t.run.ThreadID, RunID: t.run.RunID}}
}

func (t *translator) Line(b []byte) []event.Event {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil
	}
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return nil
	}
	switch l.Type {
	case "text":
		if s, ok := l.Data.(string); ok {
			return t.textDelta(s)
		}
	case "thought":
		if s, ok := l.Data.(string); ok && s != "" {
			return t.thought(s)
		}
	case "tool_call", "tool_call_update":
		return t.tool(l)
	case "plan":
		if len(l.Entries) > 0 && json.Valid(l.Entries) {
			return append(t.closeBlocks(), event.CustomEvent(EventPlan, map[string]json.RawMessage{"entries": l.Entries}))
		}
	case "end":
		t.ended = true
		t.stopReason, t.usage = l.StopReason, l.Usage
		return append(t.closeBlocks(), t.sessionStarted(l.SessionID)...)
	case "error":
		if t.errMsg == "" {
			t.errMsg = l.Message
			if t.errMsg == "" {
				t.errMsg = "Grok reported an error"
			}
		}
	case "max_turns_reached":
		if t.stopReason == "" {
			t.stopReason = "max_turn_requests"
		}
	// Codex-shaped events of older releases.
	case "thread.started":
		return t.sessionStarted(l.ThreadID)
	case "item.started", "item.updated", "item.completed":
		return t.legacyItem(l)
	case "turn.completed":
		t.ended, t.usage = true, l.Usage
	case "turn.failed":
		if t.errMsg == "" {
			var e struct {
				Message string `json:"message"`
			}
			_ = json.Unmarshal(l.Error, &e)
			t.errMsg = e.Message
			if t.errMsg == "" {
				t.errMsg = "the turn failed"
			}
		}
	}
	return nil
}

func (t *translator) sessionStarted(id string) []event.Event {
	if id == "" || id == t.session {
		return nil
	}
	t.session = id
	return []event.Event{event.CustomEvent(event.SessionStarted, event.Session{ID: id})}
}

func (t *translator) legacyItem(l line) []event.Event {
	it := l.Item
	if it == nil || it.ID == "" {
		return nil
	}
	switch it.Type {
	case "agent_message":
		sent := t.legacyText[it.ID]
		if len(it.Text) <= len(sent) || !strings.HasPrefix(it.Text, sent) {
			return nil
		}
		t.legacyText[it.ID] = it.Text
		return t.textDelta(it.Text[len(sent):])
	case "reasoning":
		if l.Type == "item.completed" && it.Text != "" {
			out := t.thought(it.Text)
			return append(out, t.closeReasoning()...)
		}
	}
	return nil
}

func (t *translator) textDelta(s string) []event.Event { return t.blocks.Text(s) }
func (t *translator) thought(s string) []event.Event   { return t.blocks.Reasoning(s) }
func (t *translator) closeText() []event.Event         { return t.blocks.CloseText() }
func (t *translator) closeReasoning() []event.Event    { return t.blocks.CloseReasoning() }
func (t *translator) closeBlocks() []event.Event       { return t.blocks.Close() }

// tool applies a tool_call or tool_call_update: START when the id is new
// (named by Grok's tool name, else its kind), ARGS and END once the input
// is known, RESULT when the call completed or failed.
func (t *translator) tool(l line) []event.Event {
	if l.ToolCallID == "" {
		return nil
	}
	var out []event.Event
	tc := t.tools[l.ToolCallID]
	if tc == nil {
		name := l.ToolName
		if name == "" {
			name = l.Kind
		}
		if name == "" {
			name = "tool"
		}
		tc = &tool{}
		t.tools[l.ToolCallID] = tc
		t.order = append(t.order, l.ToolCallID)
		out = append(out, t.closeBlocks()...)
		out = append(out, event.Event{Type: event.ToolCallStart, ToolCallID: l.ToolCallID, ToolCallName: name})
	}
	if tc.done {
		return out
	}
	if l.Title != nil && *l.Title != "" {
		tc.title = *l.Title
	}
	if len(l.RawInput) > 0 && string(l.RawInput) != "null" && !tc.argsSent {
		out = append(out, t.args(l.ToolCallID, tc, l.RawInput)...)
	}
	if l.Status == "completed" || l.Status == "failed" {
		if !tc.argsSent {
			out = append(out, t.args(l.ToolCallID, tc, nil)...)
		}
		tc.done = true
		out = append(out, event.Event{Type: event.ToolCallResult, ToolCallID: l.ToolCallID, MessageID: t.ids.Next("result"),
			Content: result(l), IsError: l.Status == "failed"})
	}
	return out
}

func (t *translator) args(id string, tc *tool, raw json.RawMessage) []event.Event {
	tc.argsSent = true
	args := map[string]any{}
	var v any
	if len(raw) > 0 && json.Unmarshal(raw, &v) == nil {
		if m, ok := v.(map[string]any); ok {
			args = m
		} else if v != nil {
			args["input"] = v
		}
	}
	if _, ok := args["title"]; !ok && tc.title != "" {
		args["title"] = tc.title
	}
	b, err := json.Marshal(args)
	if err != nil {
		b = []byte(`{}`)
	}
	return []event.Event{{Type: event.ToolCallArgs, ToolCallID: id, Delta: string(b)}, {Type: event.ToolCallEnd, ToolCallID: id}}
}

// result is a finished call's output: its raw output (a string as it is,
// anything else as JSON), else the text of its content, else its status.
func result(l line) string {
	if len(l.RawOutput) > 0 && string(l.RawOutput) != "null" {
		var s string
		if json.Unmarshal(l.RawOutput, &s) == nil {
			return s
		}
		var buf bytes.Buffer
		if json.Compact(&buf, l.RawOutput) == nil {
			return buf.String()
		}
	}
	var parts []string
	for _, c := range l.Content {
		var block struct {
			Type    string `json:"type"`
			Text    string `json:"text"`
			Content struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		}
		if json.Unmarshal(c, &block) != nil {
			continue
		}
		switch {
		case block.Type == "content" && block.Content.Text != "":
			parts = append(parts, block.Content.Text)
		case block.Type == "text" && block.Text != "":
			parts = append(parts, block.Text)
		}
	}
	if len(parts) > 0 {
		return strings.Join(parts, "\n")
	}
	b, _ := json.Marshal(map[string]string{"status": l.Status})
	return string(b)
}

// normalizeStop reads both the snake_case stop reasons of current releases
// and the CamelCase ones of earlier ones (EndTurn, Cancelled).
func normalizeStop(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (t *translator) End(code int) []event.Event {
	out := t.closeBlocks()
	for _, id := range t.order {
		tc := t.tools[id]
		if tc.done {
			continue
		}
		if !tc.argsSent {
			out = append(out, t.args(id, tc, nil)...)
		}
		tc.done = true
		out = append(out, event.Event{Type: event.ToolCallResult, ToolCallID: id, MessageID: t.ids.Next("result"), Content: `{"status":"interrupted"}`, IsError: true})
	}
	c := code
	fail := func(msg, errCode string) []event.Event {
		return append(out, event.Event{Type: event.RunError, ThreadID: t.run.ThreadID, RunID: t.run.RunID, Message: msg, Code: errCode, ExitCode: &c})
	}
	if t.errMsg != "" {
		return fail(t.errMsg, "grok-error")
	}
	if !t.ended {
		if code != 0 {
			return fail(fmt.Sprintf("grok exited with code %d", code), "exit")
		}
		return fail("grok exited without ending the turn", "incomplete")
	}
	switch stop := normalizeStop(t.stopReason); stop {
	case "refusal":
		return fail("Grok refused the prompt", "refusal")
	case "cancelled":
		return fail("Grok cancelled the turn (headless Grok cancels a tool call that needs a permission the policy did not grant)", "cancelled")
	case "end_turn", "":
	default:
		out = append(out, event.CustomEvent(EventStop, map[string]any{"stopReason": stop, "usage": t.usage}))
	}
	if code != 0 {
		return fail(fmt.Sprintf("grok exited with code %d", code), "exit")
	}
	return append(out, event.Event{Type: event.RunFinished, ThreadID: t.run.ThreadID, RunID: t.run.RunID, ExitCode: &c})
}
