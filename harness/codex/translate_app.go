package codex

import (
	"encoding/json"
	"strings"

	"github.com/d10ffeed/corral/event"
)

// The warm turn client relays `codex app-server` JSON-RPC messages
// (notifications and the answer to its turn/start request), one a line.
// The translator maps them onto the items of `codex exec --json`, so a warm
// turn gives the events a cold one gives: text, reasoning, command, file
// change, MCP and web search calls with their arguments and results, and
// errors. Usage (thread/tokenUsage/updated) gives no event, as cold.

// appLine is one app-server JSON-RPC message.
type appLine struct {
	Method string          `json:"method"`
	ID     json.RawMessage `json:"id"`
	Params json.RawMessage `json:"params"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// appParams are the fields of the notifications the translator reads.
type appParams struct {
	ThreadID     string          `json:"threadId"`
	ItemID       string          `json:"itemId"`
	Delta        string          `json:"delta"`
	SummaryIndex *int            `json:"summaryIndex"`
	Item         json.RawMessage `json:"item"`
	Message      string          `json:"message"`
	WillRetry    bool            `json:"willRetry"`
	Error        *struct {
		Message string `json:"message"`
	} `json:"error"`
	Turn *struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Error  *struct {
			Message string `json:"message"`
		} `json:"error"`
	} `json:"turn"`
}

// appItem is an app-server ThreadItem (the fields the translator reads).
type appItem struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Text             string          `json:"text"`
	Summary          []string        `json:"summary"`
	Content          json.RawMessage `json:"content"`
	Command          string          `json:"command"`
	AggregatedOutput *string         `json:"aggregatedOutput"`
	ExitCode         *int            `json:"exitCode"`
	Status           string          `json:"status"`
	Changes          []struct {
		Path string `json:"path"`
		Kind struct {
			Type string `json:"type"`
		} `json:"kind"`
	} `json:"changes"`
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Result    json.RawMessage `json:"result"`
	Error     *struct {
		Message string `json:"message"`
	} `json:"error"`
	Query string `json:"query"`
}

// isAppLine tells an app-server message from a `codex exec --json` event.
func isAppLine(b []byte) bool {
	s := string(b)
	return strings.HasPrefix(s, `{"method":`) || strings.HasPrefix(s, `{"id":`) || strings.HasPrefix(s, `{"error":`)
}

func (t *translator) appLine(b []byte) []event.Event {
	var l appLine
	if json.Unmarshal(b, &l) != nil {
		return nil
	}
	var p appParams
	_ = json.Unmarshal(l.Params, &p)
	switch l.Method {
	case "":
		// The answer to the turn/start request: only an error matters.
		if l.Error != nil {
			t.failed = "codex refused the turn: " + l.Error.Message
		}
		return nil
	case "turn/started":
		if p.ThreadID == "" || p.ThreadID == t.session {
			return nil
		}
		t.session = p.ThreadID
		return []event.Event{event.CustomEvent(event.SessionStarted, event.Session{ID: p.ThreadID})}
	case "item/started", "item/completed":
		var it appItem
		if json.Unmarshal(p.Item, &it) != nil {
			return nil
		}
		ex, ok := execItem(it)
		if !ok {
			return nil
		}
		if ex.Type == "agent_message" || ex.Type == "reasoning" {
			// Deltas carry the text; a start with none opens nothing.
			if o := t.open[ex.ID]; o != nil && l.Method == "item/completed" && ex.Text == "" {
				ex.Text = o.text
			}
			if l.Method == "item/started" && ex.Text == "" {
				return nil
			}
		}
		return t.item(l.Method == "item/completed", ex)
	case "item/agentMessage/delta":
		return t.appDelta(openText, "agent_message", p)
	case "item/reasoning/summaryTextDelta", "item/reasoning/textDelta":
		return t.appDelta(openReasoning, "reasoning", p)
	case "item/reasoning/summaryPartAdded":
		if o := t.open[p.ItemID]; o != nil && o.kind == openReasoning && o.text != "" {
			o.text += "\n\n"
			return []event.Event{{Type: event.ReasoningContent, MessageID: o.id, Delta: "\n\n"}}
		}
		return nil
	case "error":
		msg := "codex reported an error"
		if p.Error != nil && p.Error.Message != "" {
			msg = p.Error.Message
		}
		t.lastErr = msg
		return []event.Event{event.CustomEvent(ErrorEvent, map[string]string{"message": msg})}
	case "warning":
		return []event.Event{event.CustomEvent(ErrorEvent, map[string]string{"message": p.Message})}
	case "turn/completed":
		if p.Turn != nil && p.Turn.Status == "failed" {
			t.failed = "the codex turn failed"
			if p.Turn.Error != nil && p.Turn.Error.Message != "" {
				t.failed = p.Turn.Error.Message
			} else if t.lastErr != "" {
				t.failed = t.lastErr
			}
		}
		return t.closeMessages()
	case "corral/resumeFailed":
		return []event.Event{event.CustomEvent(ErrorEvent, map[string]string{"message": "the codex thread could not be resumed: a new one was started"})}
	case "corral/keeperExited":
		t.lastErr = "the warm codex app-server exited"
	}
	return nil
}

// appDelta grows an open message or reasoning block by a delta.
func (t *translator) appDelta(kind openKind, typ string, p appParams) []event.Event {
	if p.ItemID == "" || p.Delta == "" {
		return nil
	}
	text := p.Delta
	if o := t.open[p.ItemID]; o != nil && o.kind == kind {
		text = o.text + p.Delta
	}
	return t.grow(kind, false, item{ID: p.ItemID, Type: typ, Text: text})
}

// execItem maps an app-server ThreadItem onto the `codex exec --json`
// item of the same thing; ok false for items that give no event.
func execItem(it appItem) (item, bool) {
	ex := item{ID: it.ID, Status: execStatus(it.Status)}
	switch it.Type {
	case "agentMessage":
		ex.Type, ex.Text = "agent_message", it.Text
	case "reasoning":
		ex.Type, ex.Text = "reasoning", strings.Join(it.Summary, "\n\n")
		if ex.Text == "" {
			var content []string
			_ = json.Unmarshal(it.Content, &content)
			ex.Text = strings.Join(content, "\n\n")
		}
	case "commandExecution":
		ex.Type, ex.Command, ex.ExitCode = "command_execution", it.Command, it.ExitCode
		if it.AggregatedOutput != nil {
			ex.AggregatedOutput = *it.AggregatedOutput
		}
	case "fileChange":
		changes := make([]map[string]string, 0, len(it.Changes))
		for _, c := range it.Changes {
			changes = append(changes, map[string]string{"path": c.Path, "kind": c.Kind.Type})
		}
		ex.Type, ex.Changes = "file_change", json.RawMessage(jsonString(changes))
	case "mcpToolCall":
		ex.Type, ex.Server, ex.Tool, ex.Arguments, ex.Result = "mcp_tool_call", it.Server, it.Tool, it.Arguments, it.Result
		if it.Error != nil {
			ex.Error = &struct {
				Message string `json:"message"`
			}{it.Error.Message}
		}
	case "webSearch":
		ex.Type, ex.Query = "web_search", it.Query
	default:
		return item{}, false
	}
	return ex, true
}

// execStatus maps the app-server's camelCase statuses onto exec's.
func execStatus(s string) string {
	if s == "inProgress" {
		return "in_progress"
	}
	return s
}
