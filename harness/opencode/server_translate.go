package opencode

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// Lines serve-client.js writes itself; every other line is a server event
// as `opencode serve` sent it.
const (
	clientLine     = "corral.client"              // first line: the journal is server mode's
	clientSession  = "corral.session"             // the session the prompt goes to
	clientError    = "corral.error"               // the client failed (server, session, stream)
	clientDecision = "corral.permission"          // how the client answered a permission.asked (or that it waits)
	clientAnswered = "corral.permission_answered" // a waiting permission was settled
	clientWarning  = "corral.warning"             // something the user should know
)

// EventWarning carries something the user should know (value:
// {"message"}), such as live answers the server-mode client refused.
const EventWarning = "opencode.warning"

// interrupted is the result of a tool call the journal never resolved.
const interrupted = `{"status":"interrupted"}`

// serverEvent is a line of server mode's journal: {type, properties}.
type serverEvent struct {
	Type       string          `json:"type"`
	Properties json.RawMessage `json:"properties"`
}

// serverProps are the properties the translator reads, of any event type.
type serverProps struct {
	SessionID string      `json:"sessionID"`
	MessageID string      `json:"messageID"`
	PartID    string      `json:"partID"`
	Field     string      `json:"field"`
	Delta     string      `json:"delta"`
	Part      *serverPart `json:"part"`
	Info      *struct {
		ID   string `json:"id"`
		Role string `json:"role"`
	} `json:"info"`
	Error *apiError `json:"error"`
	// corral.error
	Message string `json:"message"`
	// corral.permission
	Permission string   `json:"permission"`
	Patterns   []string `json:"patterns"`
	Decision   string   `json:"decision"`
	ApprovalID string   `json:"approvalId"` // a waiting permission's approval id
	Wait       string   `json:"wait"`       // how long it waits
	Allowed    bool     `json:"allowed"`    // corral.permission_answered
	By         string   `json:"by"`
	Tool       *struct {
		CallID string `json:"callID"`
	} `json:"tool"`
}

// serverPart is a message part as the server sends it.
type serverPart struct {
	part
	ID        string `json:"id"`
	MessageID string `json:"messageID"`
	Time      *struct {
		End *float64 `json:"end"`
	} `json:"time"`
}

// serverCall is a tool call the journal opened.
type serverCall struct {
	id       string
	name     string
	input    json.RawMessage
	args     bool // TOOL_CALL_ARGS and TOOL_CALL_END sent
	resolved bool
}

// serverTranslator translates server mode's journal: serve-client.js's own
// lines and the events of `opencode serve` for the run's session (events
// of other sessions, a subagent's, are skipped).
//
//   - message.part.delta of a text or reasoning part: TEXT_MESSAGE_* and
//     REASONING_* deltas (event.Blocks); the part's final
//     message.part.updated adds what the deltas missed and closes it.
//   - a tool part: TOOL_CALL_START when it appears, ARGS and END once its
//     input is known (running), TOOL_CALL_RESULT when it completed or
//     failed; a call still open at End gets an interrupted result.
//   - corral.permission with decision "ask": approval.requested for the
//     call that asked (its tool and input, as in run mode).
//   - corral.session: session.started; session.error and corral.error make
//     the run end with RUN_ERROR.
//
// Parts of user messages (the prompt) are skipped.
type serverTranslator struct {
	run       harness.Run
	ids       *event.IDs
	blocks    event.Blocks
	session   string
	roles     map[string]string // message id → role
	kinds     map[string]string // part id → "text" or "reasoning"
	sent      map[string]string // part id → the text sent so far
	textPart  string            // the part the open text message is
	reasonPrt string            // the part the open reasoning is
	calls     map[string]*serverCall
	order     []string // call keys in the order they opened
	approvals map[string]bool
	errMsg    string
}

func newServerTranslator(run harness.Run) *serverTranslator {
	ids := &event.IDs{RunID: run.RunID}
	return &serverTranslator{
		run: run, ids: ids, blocks: event.Blocks{IDs: ids},
		roles: map[string]string{}, kinds: map[string]string{}, sent: map[string]string{},
		calls: map[string]*serverCall{}, approvals: map[string]bool{},
	}
}

func (t *serverTranslator) fail(msg string) {
	if t.errMsg == "" {
		t.errMsg = msg
	} else {
		t.errMsg += "\n" + msg
	}
}

func (t *serverTranslator) Line(b []byte) []event.Event {
	var ev serverEvent
	if json.Unmarshal(b, &ev) != nil || ev.Type == "" {
		return nil
	}
	var p serverProps
	if len(ev.Properties) > 0 && json.Unmarshal(ev.Properties, &p) != nil {
		return nil
	}
	var out []event.Event
	switch ev.Type {
	case clientLine:
		return nil
	case clientSession:
		return t.setSession(p.SessionID)
	case clientError:
		msg := p.Message
		if msg == "" {
			msg = "the opencode server client failed"
		}
		t.fail(msg)
		return nil
	case clientDecision:
		if p.Decision != string(sandbox.Ask) {
			return nil
		}
		if p.ApprovalID != "" && p.Wait != "" {
			return t.waiting(p)
		}
		return t.approval(p)
	case clientAnswered:
		if p.ApprovalID == "" {
			return nil
		}
		return []event.Event{event.CustomEvent(event.ApprovalAnswered, event.ApprovalAnswer{ApprovalID: p.ApprovalID, Allowed: p.Allowed, By: p.By})}
	case clientWarning:
		if p.Message == "" {
			return nil
		}
		return []event.Event{event.CustomEvent(EventWarning, map[string]string{"message": p.Message})}
	}
	if p.SessionID != "" {
		if t.session == "" {
			out = t.setSession(p.SessionID)
		} else if p.SessionID != t.session {
			return nil
		}
	}
	switch ev.Type {
	case "message.updated":
		if p.Info != nil && p.Info.ID != "" {
			t.roles[p.Info.ID] = p.Info.Role
		}
	case "message.part.delta":
		if t.roles[p.MessageID] == "user" || p.Field != "text" {
			return out
		}
		return append(out, t.delta(p.PartID, t.kinds[p.PartID], p.Delta)...)
	case "message.part.updated":
		if p.Part == nil || t.roles[p.Part.MessageID] == "user" {
			return out
		}
		return append(out, t.part(p.Part)...)
	case "session.error":
		t.fail(p.Error.message())
	}
	return out
}

func (t *serverTranslator) setSession(id string) []event.Event {
	if id == "" || id == t.session {
		return nil
	}
	t.session = id
	return []event.Event{event.CustomEvent(event.SessionStarted, event.Session{ID: id})}
}

// delta sends text of a text or reasoning part.
func (t *serverTranslator) delta(partID, kind, text string) []event.Event {
	if text == "" || partID == "" {
		return nil
	}
	var out []event.Event
	switch kind {
	case "text":
		if t.textPart != partID {
			out = append(out, t.blocks.CloseText()...)
			t.textPart = partID
		}
		out = append(out, t.blocks.Text(text)...)
		t.reasonPrt = ""
	case "reasoning":
		if t.reasonPrt != partID {
			out = append(out, t.blocks.CloseReasoning()...)
			t.reasonPrt = partID
		}
		out = append(out, t.blocks.Reasoning(text)...)
		t.textPart = ""
	default:
		return nil
	}
	t.sent[partID] += text
	return out
}

func (t *serverTranslator) part(p *serverPart) []event.Event {
	switch p.Type {
	case "text", "reasoning":
		if p.ID == "" {
			return nil
		}
		t.kinds[p.ID] = p.Type
		if p.Time == nil || p.Time.End == nil {
			return nil
		}
		// The part is done: send what the deltas did not, then close it.
		var out []event.Event
		if rest, ok := strings.CutPrefix(p.Text, t.sent[p.ID]); ok {
			out = t.delta(p.ID, p.Type, rest)
		}
		switch {
		case p.Type == "text" && t.textPart == p.ID:
			out = append(out, t.blocks.CloseText()...)
			t.textPart = ""
		case p.Type == "reasoning" && t.reasonPrt == p.ID:
			out = append(out, t.blocks.CloseReasoning()...)
			t.reasonPrt = ""
		}
		return out
	case "tool":
		return t.tool(p)
	}
	return nil
}

func (t *serverTranslator) tool(p *serverPart) []event.Event {
	key := p.CallID
	if key == "" {
		key = p.ID
	}
	if key == "" {
		return nil
	}
	var out []event.Event
	c := t.calls[key]
	if c == nil {
		out = append(out, t.closeBlocks()...)
		c = &serverCall{id: t.ids.Next("tool"), name: p.Tool}
		if c.name == "" {
			c.name = "tool"
		}
		t.calls[key] = c
		t.order = append(t.order, key)
		out = append(out, event.Event{Type: event.ToolCallStart, ToolCallID: c.id, ToolCallName: c.name})
	}
	if c.resolved {
		return out
	}
	status := p.State.Status
	if status != "running" && status != "completed" && status != "error" {
		return out
	}
	if len(p.State.Input) > 0 && json.Valid(p.State.Input) {
		c.input = p.State.Input
	}
	if !c.args {
		out = append(out, t.openArgs(c)...)
	}
	if status == "completed" || status == "error" {
		c.resolved = true
		out = append(out, toolResult(c.id, t.ids.Next("result"), c.name, &p.part))
		out = append(out, fileChange(c.id, c.name, &p.part)...)
	}
	return out
}

// openArgs sends a call's arguments and closes them.
func (t *serverTranslator) openArgs(c *serverCall) []event.Event {
	c.args = true
	args := "{}"
	if len(c.input) > 0 {
		args = string(c.input)
	}
	return []event.Event{
		{Type: event.ToolCallArgs, ToolCallID: c.id, Delta: args},
		{Type: event.ToolCallEnd, ToolCallID: c.id},
	}
}

func (t *serverTranslator) closeBlocks() []event.Event {
	t.textPart, t.reasonPrt = "", ""
	return t.blocks.Close()
}

// request is the approval.requested event for permission p: for the
// tool call that asked, as run mode derives it, else for the permission
// itself.
func (t *serverTranslator) request(p serverProps) event.Event {
	if c := t.callFor(p); c != nil {
		return approval(c.name, c.input)
	}
	target := p.Permission
	if target == "" {
		target = "tool"
	}
	return event.CustomEvent(event.ApprovalRequested, event.Approval{
		ID: sandbox.ApprovalID(Name, sandbox.ApproveTool, target), Kind: string(sandbox.ApproveTool), Target: target,
		Title: "opencode asks for the permission " + target,
	})
}

// approval is approval.requested for a permission the client left to a
// person: for the tool call that asked, as run mode derives it, else for
// the permission itself.
func (t *serverTranslator) approval(p serverProps) []event.Event {
	e := t.request(p)
	var a event.Approval
	if json.Unmarshal(e.Value, &a) == nil {
		if t.approvals[a.ID] {
			return nil
		}
		t.approvals[a.ID] = true
	}
	return []event.Event{e}
}

// waiting is approval.requested and approval.waiting for a permission the
// client holds open for a live answer, under the approval id the client
// waits for (the one an answer must name).
func (t *serverTranslator) waiting(p serverProps) []event.Event {
	var a event.Approval
	_ = json.Unmarshal(t.request(p).Value, &a)
	a.ID = p.ApprovalID
	t.approvals[a.ID] = true
	return []event.Event{
		event.CustomEvent(event.ApprovalRequested, a),
		event.CustomEvent(event.ApprovalWaiting, map[string]string{"approvalId": a.ID, "wait": p.Wait}),
	}
}

func (t *serverTranslator) callFor(p serverProps) *serverCall {
	if p.Tool == nil || p.Tool.CallID == "" {
		return nil
	}
	return t.calls[p.Tool.CallID]
}

func (t *serverTranslator) End(code int) []event.Event {
	out := t.closeBlocks()
	for _, key := range t.order {
		c := t.calls[key]
		if c.resolved {
			continue
		}
		if !c.args {
			out = append(out, t.openArgs(c)...)
		}
		c.resolved = true
		out = append(out, event.Event{Type: event.ToolCallResult, ToolCallID: c.id, MessageID: t.ids.Next("result"), Content: interrupted, IsError: true})
	}
	c := code
	if code == 0 && t.errMsg == "" {
		return append(out, event.Event{Type: event.RunFinished, ThreadID: t.run.ThreadID, RunID: t.run.RunID, ExitCode: &c})
	}
	msg := t.errMsg
	if msg == "" {
		msg = fmt.Sprintf("opencode exited with code %d", code)
	}
	return append(out, event.Event{Type: event.RunError, ThreadID: t.run.ThreadID, RunID: t.run.RunID, Message: msg, Code: "exit", ExitCode: &c})
}
