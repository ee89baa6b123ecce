package codex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// ErrorEvent is the CUSTOM event for codex's non-fatal errors (value
// {"message": ...}): top-level "error" events such as "Reconnecting...
// 1/5" and "error" items such as missing model metadata. Only a failed turn
// or a non-zero exit ends a run with RUN_ERROR.
const ErrorEvent = "codex.error"

// TodoEvent is the CUSTOM event for codex's todo_list items (value
// {"items": [...]}, as codex reports them).
const TodoEvent = "codex.todo_list"

// Tool names of the tool calls codex reports (MCP calls are named
// mcp__<server>__<tool>).
const (
	ToolCommand    = "command_execution"
	ToolFileChange = "file_change"
	ToolWebSearch  = "web_search"
)

// line is one codex JSONL event.
type line struct {
	Type     string          `json:"type"`
	ThreadID string          `json:"thread_id"`
	Item     json.RawMessage `json:"item"`
	Message  string          `json:"message"`
	Error    *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// item is a codex thread item (the fields of every type it has).
type item struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Text             string          `json:"text"`
	Message          string          `json:"message"`
	Command          string          `json:"command"`
	AggregatedOutput string          `json:"aggregated_output"`
	ExitCode         *int            `json:"exit_code"`
	Status           string          `json:"status"`
	Changes          json.RawMessage `json:"changes"`
	Server           string          `json:"server"`
	Tool             string          `json:"tool"`
	Arguments        json.RawMessage `json:"arguments"`
	Result           json.RawMessage `json:"result"`
	Error            *struct {
		Message string `json:"message"`
	} `json:"error"`
	Query string          `json:"query"`
	Items json.RawMessage `json:"items"`
}

type openKind int

const (
	openText openKind = iota
	openReasoning
	openTool
)

// open is a message, reasoning block or tool call still open, keyed by the
// codex item id.
type open struct {
	kind openKind
	id   string
	text string
}

type translator struct {
	run     harness.Run
	ids     event.IDs
	session string
	open    map[string]*open
	order   []string // codex item ids, in the order they opened
	failed  string   // the failed turn's message
	lastErr string   // the last top-level error's message (says why codex gave up)
	// askServers are the MCP servers whose tools the policy asks about
	// (from the harness's corral.mcp_ask line); asked, those already
	// turned into approval.requested.
	askServers map[string]bool
	asked      map[string]bool
}

func newTranslator(run harness.Run) *translator {
	return &translator{run: run, ids: event.IDs{RunID: run.RunID}, open: map[string]*open{}}
}

func (t *translator) Begin() []event.Event {
	return []event.Event{{Type: event.RunStarted, ThreadID: t.run.ThreadID, RunID: t.run.RunID}}
}

func (t *translator) Line(b []byte) []event.Event {
	if isAppLine(b) {
		return t.appLine(b)
	}
	var l line
	if json.Unmarshal(b, &l) != nil {
		return nil // not an event: codex writes only JSON to stdout
	}
	switch l.Type {
	case "thread.started":
		if l.ThreadID == "" || l.ThreadID == t.session {
			return nil
		}
		t.session = l.ThreadID
		return []event.Event{event.CustomEvent(event.SessionStarted, event.Session{ID: l.ThreadID})}
	case "item.started", "item.updated", "item.completed":
		var it item
		if json.Unmarshal(l.Item, &it) != nil {
			return nil
		}
		return t.item(l.Type == "item.completed", it)
	case "turn.completed":
		return t.closeMessages()
	case "turn.failed":
		msg := "the codex turn failed"
		if l.Error != nil && l.Error.Message != "" {
			msg = l.Error.Message
		}
		t.failed = msg
		return t.closeMessages()
	case "error":
		t.lastErr = l.Message
		return []event.Event{event.CustomEvent(ErrorEvent, map[string]string{"message": l.Message})}
	case mcpAskLine:
		var a struct {
			Servers []string `json:"servers"`
		}
		if json.Unmarshal(b, &a) == nil {
			if t.askServers == nil {
				t.askServers, t.asked = map[string]bool{}, map[string]bool{}
			}
			for _, s := range a.Servers {
				t.askServers[s] = true
			}
		}
	}
	return nil
}

// mcpAskLine is the line the harness writes before codex starts, naming
// the MCP servers whose tools the policy asks about.
const mcpAskLine = "corral.mcp_ask"

// mcpApproval returns the approval.requested event for a refused call of
// an asked-about server's tool, once per server.
func (t *translator) mcpApproval(it item) []event.Event {
	if it.Type != "mcp_tool_call" || it.Error == nil || !t.askServers[it.Server] || t.asked[it.Server] ||
		!strings.Contains(it.Error.Message, "requires approval") {
		return nil
	}
	t.asked[it.Server] = true
	target := "mcp__" + it.Server
	return []event.Event{event.CustomEvent(event.ApprovalRequested, event.Approval{
		ID: sandbox.ApprovalID(Name, sandbox.ApproveTool, target), Kind: string(sandbox.ApproveTool), Target: target,
		Title: "call the tools of MCP server " + it.Server,
	})}
}

func (t *translator) item(done bool, it item) []event.Event {
	switch it.Type {
	case "agent_message":
		return t.grow(openText, done, it)
	case "reasoning":
		return t.grow(openReasoning, done, it)
	case "command_execution", "file_change", "mcp_tool_call", "web_search":
		return t.tool(done, it)
	case "todo_list":
		items := it.Items
		if !json.Valid(items) {
			items = json.RawMessage("[]")
		}
		return []event.Event{event.CustomEvent(TodoEvent, map[string]json.RawMessage{"items": items})}
	case "error":
		if !done {
			return nil
		}
		return []event.Event{event.CustomEvent(ErrorEvent, map[string]string{"message": it.Message})}
	}
	return nil
}

// grow streams an agent message or reasoning item: its text grows between
// started, updated and completed; the growth is the delta.
func (t *translator) grow(kind openKind, done bool, it item) []event.Event {
	var out []event.Event
	o := t.open[it.ID]
	if o != nil && o.kind != kind {
		out = append(out, t.close(it.ID)...)
		o = nil
	}
	if o == nil {
		if done && it.Text == "" {
			return out
		}
		o = &open{kind: kind}
		if kind == openText {
			o.id = t.ids.Next("msg")
			out = append(out, event.Event{Type: event.TextMessageStart, MessageID: o.id, Role: "assistant"})
		} else {
			o.id = t.ids.Next("reasoning")
			out = append(out, event.OpenReasoning(o.id)...)
		}
		t.open[it.ID] = o
		t.order = append(t.order, it.ID)
	}
	delta := it.Text
	if strings.HasPrefix(it.Text, o.text) {
		delta = it.Text[len(o.text):]
	}
	if delta != "" {
		typ := event.TextMessageContent
		if kind == openReasoning {
			typ = event.ReasoningContent
		}
		out = append(out, event.Event{Type: typ, MessageID: o.id, Delta: delta})
		o.text = it.Text
	}
	if done {
		out = append(out, t.close(it.ID)...)
	}
	return out
}

// tool opens a tool call on its first sight (START, ARGS, END: codex knows
// the arguments at once) and gives its result on completion.
func (t *translator) tool(done bool, it item) []event.Event {
	var out []event.Event
	o := t.open[it.ID]
	if o != nil && o.kind != openTool {
		out = append(out, t.close(it.ID)...)
		o = nil
	}
	if o == nil {
		name, args := toolCall(it)
		o = &open{kind: openTool, id: t.ids.Next("tool")}
		t.open[it.ID] = o
		t.order = append(t.order, it.ID)
		out = append(out,
			event.Event{Type: event.ToolCallStart, ToolCallID: o.id, ToolCallName: name},
			event.Event{Type: event.ToolCallArgs, ToolCallID: o.id, Delta: args},
			event.Event{Type: event.ToolCallEnd, ToolCallID: o.id},
		)
	}
	if !done {
		return out
	}
	content, isErr := toolResult(it)
	t.forget(it.ID)
	out = append(out, event.Event{Type: event.ToolCallResult, ToolCallID: o.id, MessageID: t.ids.Next("result"), Content: content, IsError: isErr})
	if it.Type == "file_change" && !isErr {
		if e, ok := harness.ToolFileChange(o.id, changedPaths(it.Changes)); ok {
			out = append(out, e)
		}
	}
	return append(out, t.mcpApproval(it)...)
}

// changedPaths are the paths of a file_change item's changes.
func changedPaths(raw json.RawMessage) []string {
	var changes []struct {
		Path string `json:"path"`
	}
	_ = json.Unmarshal(raw, &changes)
	paths := make([]string, 0, len(changes))
	for _, c := range changes {
		paths = append(paths, c.Path)
	}
	return paths
}

func toolCall(it item) (name, args string) {
	switch it.Type {
	case "command_execution":
		return ToolCommand, jsonString(map[string]string{"command": unwrapShell(it.Command)})
	case "file_change":
		return ToolFileChange, jsonString(map[string]json.RawMessage{"changes": rawOr(it.Changes, "[]")})
	case "web_search":
		return ToolWebSearch, jsonString(map[string]string{"query": it.Query})
	}
	return "mcp__" + it.Server + "__" + it.Tool, string(rawOr(it.Arguments, "{}"))
}

// commandResult is a command_execution result.
type commandResult struct {
	ExitCode *int   `json:"exitCode"`
	Output   string `json:"output"`
	Status   string `json:"status,omitempty"`
}

func toolResult(it item) (string, bool) {
	failed := it.Status == "failed" || it.Status == "declined"
	switch it.Type {
	case "command_execution":
		isErr := failed || (it.ExitCode != nil && *it.ExitCode != 0)
		return jsonString(commandResult{ExitCode: it.ExitCode, Output: it.AggregatedOutput, Status: it.Status}), isErr
	case "file_change":
		return jsonString(map[string]json.RawMessage{"status": json.RawMessage(jsonString(it.Status)), "changes": rawOr(it.Changes, "[]")}), failed
	case "mcp_tool_call":
		if it.Error != nil {
			return it.Error.Message, true
		}
		return string(rawOr(it.Result, "null")), failed
	}
	status := it.Status
	if status == "" {
		status = "completed"
	}
	return jsonString(map[string]string{"status": status}), failed
}

// closeMessages ends the open messages and reasoning blocks (a turn's end);
// tool calls stay open until their result or End.
func (t *translator) closeMessages() []event.Event {
	var out []event.Event
	for _, id := range append([]string(nil), t.order...) {
		if o := t.open[id]; o != nil && o.kind != openTool {
			out = append(out, t.close(id)...)
		}
	}
	return out
}

// close ends one open item; a tool call gets the interrupted result.
func (t *translator) close(id string) []event.Event {
	o := t.open[id]
	if o == nil {
		return nil
	}
	t.forget(id)
	switch o.kind {
	case openText:
		return []event.Event{{Type: event.TextMessageEnd, MessageID: o.id}}
	case openReasoning:
		return event.CloseReasoning(o.id)
	}
	return []event.Event{{Type: event.ToolCallResult, ToolCallID: o.id, MessageID: t.ids.Next("result"), Content: `{"status":"interrupted"}`, IsError: true}}
}

func (t *translator) forget(id string) {
	delete(t.open, id)
	for i, v := range t.order {
		if v == id {
			t.order = append(t.order[:i], t.order[i+1:]...)
			break
		}
	}
}

func (t *translator) End(code int) []event.Event {
	var out []event.Event
	for _, id := range append([]string(nil), t.order...) {
		out = append(out, t.close(id)...)
	}
	c := code
	switch {
	case t.failed != "":
		return append(out, event.Event{Type: event.RunError, ThreadID: t.run.ThreadID, RunID: t.run.RunID, Message: t.failed, Code: "turn_failed", ExitCode: &c})
	case code != 0:
		msg := fmt.Sprintf("codex exited with code %d", code)
		if t.lastErr != "" {
			msg += ": " + t.lastErr
		}
		return append(out, event.Event{Type: event.RunError, ThreadID: t.run.ThreadID, RunID: t.run.RunID, Message: msg, Code: "exit", ExitCode: &c})
	}
	return append(out, event.Event{Type: event.RunFinished, ThreadID: t.run.ThreadID, RunID: t.run.RunID, ExitCode: &c})
}

func rawOr(r json.RawMessage, def string) json.RawMessage {
	if len(r) == 0 || !json.Valid(r) {
		return json.RawMessage(def)
	}
	return r
}

// jsonString encodes plain data as JSON, without HTML escaping.
func jsonString(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("codex: " + err.Error()) // plain data only
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// unwrapShell returns the script of a command codex reports as
// `<shell> -lc '<script>'` (or -c), else the command as it is.
func unwrapShell(cmd string) string {
	for _, sh := range []string{"/bin/bash", "bash", "/usr/bin/bash", "/bin/zsh", "zsh", "/bin/sh", "sh"} {
		for _, flag := range []string{" -lc ", " -c "} {
			if rest, ok := strings.CutPrefix(cmd, sh+flag); ok {
				if word, ok := shellWord(rest); ok {
					return word
				}
			}
		}
	}
	return cmd
}

// shellWord parses s as exactly one POSIX shell word (quotes and
// backslashes, no expansions).
func shellWord(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); {
		switch c := s[i]; c {
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return "", false
			}
			b.WriteString(s[i+1 : i+1+j])
			i += j + 2
		case '"':
			i++
			for {
				if i >= len(s) {
					return "", false
				}
				if s[i] == '"' {
					i++
					break
				}
				if s[i] == '$' || s[i] == '`' {
					return "", false
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0 {
					i++
				}
				b.WriteByte(s[i])
				i++
			}
		case '\\':
			if i+1 >= len(s) {
				return "", false
			}
			b.WriteByte(s[i+1])
			i += 2
		case ' ', '\t', '\n', '$', '`', ';', '&', '|', '<', '>', '(', ')', '*', '?', '[', '~':
			return "", false
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), true
}
