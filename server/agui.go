package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/sandbox"
)

// aguiInput is AG-UI 1.0's RunAgentInput, as POST /v1/runs reads it (the
// body of @ag-ui/client's HttpAgent.runAgent). It is open like the schema:
// fields corral does not use are ignored, except state, tools and context,
// which corral's agents cannot take and so are refused when not empty.
type aguiInput struct {
	ThreadID       string            `json:"threadId"`
	RunID          string            `json:"runId"`
	State          json.RawMessage   `json:"state"`
	Messages       []aguiMessage     `json:"messages"`
	Tools          []json.RawMessage `json:"tools"`
	Context        []json.RawMessage `json:"context"`
	ForwardedProps json.RawMessage   `json:"forwardedProps"`
	Resume         []aguiResume      `json:"resume"`
}

type aguiMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// aguiResume answers one interrupt (an approval.requested of the thread).
type aguiResume struct {
	InterruptID string          `json:"interruptId"`
	Status      string          `json:"status"`
	Payload     json.RawMessage `json:"payload"`
}

// AGUIProps is what corral reads from RunAgentInput.forwardedProps: the
// fields of a StartRun that AG-UI has no place for. Unknown keys are
// refused.
type AGUIProps struct {
	Definition string            `json:"definition,omitempty"`
	Harness    string            `json:"harness,omitempty"`
	Args       []string          `json:"args,omitempty"`
	Model      string            `json:"model,omitempty"`
	Mode       string            `json:"mode,omitempty"`
	Auth       string            `json:"auth,omitempty"`
	Options    map[string]string `json:"options,omitempty"`
}

// isAGUIInput tells a RunAgentInput from a StartRun: it has messages, a
// threadId or a runId, none of which a StartRun has.
func isAGUIInput(body []byte) bool {
	var probe map[string]json.RawMessage
	if json.Unmarshal(body, &probe) != nil {
		return false
	}
	for _, k := range []string{"messages", "threadId", "runId"} {
		if _, ok := probe[k]; ok {
			return true
		}
	}
	return false
}

// fromAGUI maps a RunAgentInput to a StartRun and the run id the client
// chose: threadId → thread, the last user message → prompt,
// forwardedProps → definition, harness, args, model, mode, auth and options,
// resume → approvals (resolved allows unless its payload is false or has
// "allow": false; cancelled denies).
func fromAGUI(body []byte) (api.StartRun, string, error) {
	var in aguiInput
	if err := json.Unmarshal(body, &in); err != nil {
		return api.StartRun{}, "", badRequest("the body is not a valid AG-UI RunAgentInput: %v", err)
	}
	if in.ThreadID == "" || in.RunID == "" {
		return api.StartRun{}, "", badRequest("RunAgentInput needs threadId and runId")
	}
	if s := bytes.TrimSpace(in.State); len(s) > 0 && !bytes.Equal(s, []byte("null")) && !bytes.Equal(s, []byte("{}")) {
		return api.StartRun{}, "", badRequest("RunAgentInput.state is not supported: corral's agents keep their state in the thread's sandbox; send {} or leave it out")
	}
	if len(in.Tools) > 0 {
		return api.StartRun{}, "", badRequest("RunAgentInput.tools is not supported: corral's agents cannot call frontend tools; give the agent tools as MCP servers of the sandbox definition")
	}
	if len(in.Context) > 0 {
		return api.StartRun{}, "", badRequest("RunAgentInput.context is not supported: put what the agent should know in the user message or the workspace's instructions")
	}
	var props AGUIProps
	if p := bytes.TrimSpace(in.ForwardedProps); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(p))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&props); err != nil {
			return api.StartRun{}, "", badRequest("RunAgentInput.forwardedProps: %v (corral reads definition, harness, args, model, mode, auth, options)", err)
		}
	}
	req := api.StartRun{Definition: props.Definition, Thread: in.ThreadID, Harness: props.Harness, Args: props.Args,
		Model: props.Model, Mode: props.Mode, Auth: props.Auth, Options: props.Options}
	for i := len(in.Messages) - 1; i >= 0; i-- {
		if in.Messages[i].Role == "user" {
			text, err := messageText(in.Messages[i].Content)
			if err != nil {
				return api.StartRun{}, "", err
			}
			req.Prompt = text
			break
		}
	}
	for _, r := range in.Resume {
		if r.InterruptID == "" {
			return api.StartRun{}, "", badRequest("RunAgentInput.resume: an entry without interruptId")
		}
		if req.Approvals == nil {
			req.Approvals = map[string]bool{}
		}
		switch r.Status {
		case "resolved":
			req.Approvals[r.InterruptID] = allows(r.Payload)
		case "cancelled":
			req.Approvals[r.InterruptID] = false
		default:
			return api.StartRun{}, "", badRequest("RunAgentInput.resume %s: status %q, want resolved or cancelled", r.InterruptID, r.Status)
		}
	}
	return req, in.RunID, nil
}

// allows reads a resolved interrupt's payload: absent, true or anything
// but false / {"allow": false} / {"approved": false} allows.
func allows(payload json.RawMessage) bool {
	p := bytes.TrimSpace(payload)
	if bytes.Equal(p, []byte("false")) {
		return false
	}
	var o struct {
		Allow    *bool `json:"allow"`
		Approved *bool `json:"approved"`
	}
	if json.Unmarshal(p, &o) == nil {
		if (o.Allow != nil && !*o.Allow) || (o.Approved != nil && !*o.Approved) {
			return false
		}
	}
	return true
}

// messageText is a user message's content as text: a string, or its text
// parts joined by newlines (other parts are refused: the agents take text).
func messageText(content json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(content, &parts); err != nil {
		return "", badRequest("the user message's content is neither text nor content parts: %v", err)
	}
	var texts []string
	for _, p := range parts {
		if p.Type != "text" {
			return "", badRequest("the user message has a %q part: corral's agents take text only", p.Type)
		}
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// reconnectAGUI answers a RunAgentInput whose runId names a run of the
// tenant that exists: the client reconnects, and gets the run's events from
// the start (or after Last-Event-ID), then live. It reports whether it
// answered.
func (s *Server) reconnectAGUI(w http.ResponseWriter, r *http.Request, thread, runID string) bool {
	rec, err := s.run(r, runID)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return false
	}
	if err != nil {
		s.fail(w, r, err)
		return true
	}
	if rec.ThreadID != thread {
		s.fail(w, r, sandbox.Errorf(sandbox.AlreadyExists, "api", runID, "run %s belongs to another thread", runID))
		return true
	}
	var after int64
	if raw := r.Header.Get("Last-Event-ID"); raw != "" {
		if _, err := fmt.Sscan(raw, &after); err != nil || after < 0 {
			s.fail(w, r, badRequest("bad Last-Event-ID %q: want a sequence number, 0 or more", raw))
			return true
		}
	}
	s.stream(w, r, rec.ID, after, true)
	return true
}
