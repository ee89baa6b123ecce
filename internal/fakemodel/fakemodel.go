// Package fakemodel is a scripted model endpoint for offline tests of real
// agent CLIs. It serves, on 127.0.0.1 only, enough of three wire protocols
// for a CLI pointed at it by its base-URL setting to run a whole turn loop:
//
//   - the Anthropic Messages API: POST /v1/messages (streaming SSE and
//     plain JSON), POST /v1/messages/count_tokens;
//   - the OpenAI Responses API: POST /v1/responses (streaming SSE and
//     plain JSON);
//   - OpenAI Chat Completions: POST /v1/chat/completions (streaming and
//     plain JSON).
//
// Startup probes the CLIs make (HEAD /api/hello, GET /v1/models) get
// minimal answers; anything else is answered 404, recorded and logged to
// the test, so a CLI that needs more is easy to diagnose.
//
// What the model says comes from a Script: a list of turns, each some
// reasoning, some text, and at most one tool call (typically "run this
// shell command" through whatever shell tool the CLI declares). The turn a
// request gets is computed from the conversation it carries — the number of
// model replies already in it — never from server state, so the same
// script answers the same conversation with the same bytes, however often
// and in whatever order it is asked, and a resumed session simply goes on
// with the next turn.
//
// Point a CLI at it (each checked with the CLI versions that
// scripts/setup-agents.sh pins, offline):
//
//	srv := fakemodel.New(t, fakemodel.RunCommandThenSay("echo hi > f", "done"))
//
//	// Claude Code 2.1.332: environment, plus any ANTHROPIC_API_KEY.
//	ANTHROPIC_BASE_URL=srv.URL
//
//	// Codex 0.171.0 (Responses API): a provider without WebSockets.
//	codex exec --json -m gpt-5 -c model_provider=fake \
//	  -c 'model_providers.fake={name="fake",base_url="<srv.OpenAIURL()>",wire_api="responses",env_key="OPENAI_API_KEY",supports_websockets=false}'
//
//	// OpenCode 1.18.33 (Chat Completions), in OPENCODE_CONFIG_CONTENT:
//	{"provider":{"fake":{"npm":"@ai-sdk/openai-compatible","options":{"baseURL":"<srv.OpenAIURL()>","apiKey":"x"},"models":{"m":{}}}},"model":"fake/m"}
//
// Claude Code probes HEAD /api/hello, then streams POST /v1/messages?beta=true
// (falling back to a non-streaming request when a stream fails); Codex
// streams POST /v1/responses; OpenCode makes a tool-less side request (a
// title) and then streams POST /v1/chat/completions.
//
// Scripted errors (Turn.Error) with status 429 or 5xx are retried by the
// CLIs with backoff; use a 4xx status such as 400 or 404 for a prompt
// failure.
package fakemodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Script is what the fake model says, turn by turn.
type Script struct {
	// Turns are the model's replies in order: the n-th reply of a
	// conversation is Turns[n]. A conversation longer than the script gets
	// the text "(fakemodel: script exhausted)".
	Turns []Turn
	// Delay is slept between streamed events, so a test can act while a
	// reply is in flight. It never changes the bytes sent.
	Delay time.Duration
	// ChunkSize bounds the bytes of one streamed text, reasoning or
	// tool-argument delta (default 16; split on UTF-8 boundaries).
	ChunkSize int
	// SideText answers requests that declare no tools while the current
	// turn calls one (title generation and similar side requests CLIs make
	// with a smaller model). Default "OK".
	SideText string
	// APIKey, when set, is the key every request must carry (x-api-key,
	// or Authorization: Bearer): any other is answered 401 in the API's
	// error format, so a test proves its agent authenticated.
	APIKey string
}

// Turn is one reply of the model: its parts come in the order Thinking,
// Text, then the tool call (Command or Tool), or the reply is an HTTP error.
type Turn struct {
	// Thinking is reasoning streamed before the text (Anthropic thinking
	// block, Responses reasoning summary, Chat reasoning_content).
	Thinking string
	// Text is the visible answer.
	Text string
	// Command asks the agent to run one shell command through the shell
	// tool the request declares (Claude Code's Bash, Codex's exec_command,
	// and the like; see ShellToolNames). Its arguments follow that tool's
	// schema: a string "command" or "cmd" property, or an argv array
	// property ["bash", "-lc", Command].
	Command string
	// Tool calls a named tool with the given JSON input instead. Set at
	// most one of Command and Tool.
	Tool *ToolCall
	// Error makes the reply an HTTP error in the API's error format.
	Error *APIError
}

// ToolCall is an explicit tool call.
type ToolCall struct {
	Name  string
	Input json.RawMessage
	// Namespace is the Responses API namespace of a tool declared inside
	// one (codex puts an MCP server's tools in "mcp__<server>").
	Namespace string
}

// APIError is an error reply.
type APIError struct {
	Status  int    // HTTP status, e.g. 429 or 500
	Type    string // e.g. "rate_limit_error", "invalid_request_error"
	Message string
}

// ShellToolNames are the tool names recognised as a shell, in order of
// preference, when a turn has a Command.
var ShellToolNames = []string{"Bash", "bash", "shell", "exec_command", "shell_command", "run_shell_command", "local_shell", "container.exec", "terminal"}

// Say is a one-turn script: answer with text.
func Say(text string) Script { return Script{Turns: []Turn{{Text: text}}} }

// RunCommandThenSay is a two-turn script: run cmd through the shell tool,
// then (once the tool's result is in the conversation) answer with text.
func RunCommandThenSay(cmd, text string) Script {
	return Script{Turns: []Turn{{Command: cmd}, {Text: text}}}
}

// ThinkThenSay is a one-turn script: reasoning, then text.
func ThinkThenSay(thinking, text string) Script {
	return Script{Turns: []Turn{{Thinking: thinking, Text: text}}}
}

// Request is one request the server received.
type Request struct {
	Method string
	Path   string // URL path, without the query
	Query  string // raw query
	Header http.Header
	Body   []byte
	// Handled is false for requests answered 404.
	Handled bool
	// Turn is the script turn answered (-1 for anything else).
	Turn int
	// Unauthorized is true for a request refused for its key (see
	// Script.APIKey).
	Unauthorized bool
}

// JSON decodes the request body into v.
func (r Request) JSON(v any) error { return json.Unmarshal(r.Body, v) }

// Server is a running fake model endpoint.
type Server struct {
	// URL is the server's root, e.g. http://127.0.0.1:PORT: the Anthropic
	// base URL (the SDK appends /v1/messages).
	URL string

	script Script
	srv    *httptest.Server
	tb     testing.TB

	mu       sync.Mutex
	requests []Request
	done     bool
}

// New starts a server for the script on 127.0.0.1 and closes it when the
// test ends.
func New(tb testing.TB, script Script) *Server {
	tb.Helper()
	if script.ChunkSize <= 0 {
		script.ChunkSize = 16
	}
	if script.SideText == "" {
		script.SideText = "OK"
	}
	s := &Server{script: script, tb: tb}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("fakemodel: listen: %v", err)
	}
	s.srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}}
	s.srv.Start()
	s.URL = s.srv.URL
	tb.Cleanup(s.Close)
	return s
}

// OpenAIURL is the OpenAI-style base URL (URL + "/v1"), for
// OPENAI_BASE_URL and provider base_url settings.
func (s *Server) OpenAIURL() string { return s.URL + "/v1" }

// Close stops the server (New arranges it at the end of the test). A
// client still streaming is cut off.
func (s *Server) Close() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// ModelRequests returns the requests answered from the script (side
// requests and probes left out).
func (s *Server) ModelRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Turn >= 0 {
			out = append(out, r)
		}
	}
	return out
}

func (s *Server) logf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.tb.Logf("fakemodel: "+format, args...)
	}
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rec := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body, Handled: true, Turn: -1}
	path := strings.TrimSuffix(r.URL.Path, "/")
	if !s.authorized(r) {
		rec.Handled, rec.Unauthorized = false, true
		s.record(rec)
		writeJSON(w, http.StatusUnauthorized, map[string]any{
			"type":  "error",
			"error": map[string]any{"type": "authentication_error", "message": "fakemodel: invalid x-api-key"},
		})
		return
	}
	switch {
	case r.Method == http.MethodPost && path == "/v1/messages":
		rec.Turn = s.anthropicMessages(w, r, body)
	case r.Method == http.MethodPost && path == "/v1/messages/count_tokens":
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": tokens(len(body))})
	case r.Method == http.MethodPost && path == "/v1/responses":
		rec.Turn = s.openAIResponses(w, r, body)
	case r.Method == http.MethodPost && path == "/v1/chat/completions":
		rec.Turn = s.chatCompletions(w, r, body)
	case (r.Method == http.MethodHead || r.Method == http.MethodGet) && (path == "/api/hello" || path == ""):
		w.WriteHeader(http.StatusOK)
	case r.Method == http.MethodGet && path == "/v1/models":
		writeJSON(w, http.StatusOK, modelList())
	default:
		rec.Handled = false
		s.logf("unhandled request %s %s (%d bytes): answered 404", r.Method, r.URL.RequestURI(), len(body))
		writeJSON(w, http.StatusNotFound, map[string]any{
			"type":  "error",
			"error": map[string]any{"type": "not_found_error", "message": "fakemodel: no handler for " + r.Method + " " + r.URL.Path},
		})
	}
	s.record(rec)
}

// ModelID is the model id listed by GET /v1/models.
const ModelID = "fake-model"

func modelList() map[string]any {
	m := map[string]any{"id": ModelID, "object": "model", "type": "model", "display_name": ModelID, "created": 0, "created_at": "1970-01-01T00:00:00Z", "owned_by": "fakemodel"}
	return map[string]any{"object": "list", "data": []any{m}, "has_more": false, "first_id": ModelID, "last_id": ModelID}
}

// reply is a resolved turn: what to send, independent of the wire format.
type reply struct {
	turn     int
	thinking string
	text     string
	tool     *resolvedTool
	err      *APIError
}

type resolvedTool struct {
	name      string
	namespace string // Responses API only
	input     string // JSON
}

// tool is a tool a request declares.
type tool struct {
	name   string
	schema map[string]any
}

// resolve picks the reply for the n-th model reply of a conversation.
func (s *Server) resolve(n int, tools []tool) reply {
	if n >= len(s.script.Turns) {
		return reply{turn: n, text: "(fakemodel: script exhausted)"}
	}
	t := s.script.Turns[n]
	rp := reply{turn: n, thinking: t.Thinking, text: t.Text, err: t.Error}
	switch {
	case t.Tool != nil:
		in := string(t.Tool.Input)
		if in == "" {
			in = "{}"
		}
		rp.tool = &resolvedTool{name: t.Tool.Name, namespace: t.Tool.Namespace, input: in}
	case t.Command != "":
		if len(tools) == 0 {
			return reply{turn: -1, text: s.script.SideText}
		}
		tl, ok := shellTool(tools)
		if !ok {
			names := make([]string, len(tools))
			for i, t := range tools {
				names[i] = t.name
			}
			s.logf("turn %d wants a shell command but the request declares no shell tool (tools: %s)", n, strings.Join(names, ", "))
			rp.text = "(fakemodel: no shell tool among " + strings.Join(names, ", ") + ")"
			return rp
		}
		rp.tool = &resolvedTool{name: tl.name, input: shellInput(tl, t.Command)}
	}
	if rp.thinking == "" && rp.text == "" && rp.tool == nil && rp.err == nil {
		rp.text = " "
	}
	return rp
}

func shellTool(tools []tool) (tool, bool) {
	for _, name := range ShellToolNames {
		for _, t := range tools {
			if t.name == name {
				return t, true
			}
		}
	}
	return tool{}, false
}

// shellInput builds a shell tool's arguments from its schema.
func shellInput(t tool, cmd string) string {
	if t.schema["localShell"] == true {
		return mustJSON(map[string]any{"command": []string{"bash", "-lc", cmd}})
	}
	props, _ := t.schema["properties"].(map[string]any)
	for _, key := range []string{"command", "cmd"} {
		p, ok := props[key].(map[string]any)
		if !ok {
			continue
		}
		if p["type"] == "array" {
			return mustJSON(map[string]any{key: []string{"bash", "-lc", cmd}})
		}
		return mustJSON(map[string]any{key: cmd})
	}
	return mustJSON(map[string]any{"command": cmd})
}

// chunks splits s into pieces of at most n bytes on UTF-8 boundaries.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && !utf8Start(s[cut]) {
			cut--
		}
		if cut == 0 {
			cut = n
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

func tokens(n int) int { return n/4 + 1 }

func mustJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("fakemodel: " + err.Error())
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, mustJSON(v))
}

// sse writes server-sent events, flushing each and sleeping Delay between
// them. It stops quietly when the client goes away.
type sse struct {
	w     http.ResponseWriter
	delay time.Duration
	n     int
	dead  bool
	req   <-chan struct{}
}

func (s *Server) newSSE(w http.ResponseWriter, r *http.Request) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, delay: s.script.Delay, req: r.Context().Done()}
}

// event writes one event; name may be empty (Chat Completions).
func (e *sse) event(name string, data string) {
	if e.dead {
		return
	}
	if e.n > 0 && e.delay > 0 {
		select {
		case <-time.After(e.delay):
		case <-e.req:
			e.dead = true
			return
		}
	}
	e.n++
	var b strings.Builder
	if name != "" {
		b.WriteString("event: " + name + "\n")
	}
	b.WriteString("data: " + data + "\n\n")
	if _, err := io.WriteString(e.w, b.String()); err != nil {
		e.dead = true
		return
	}
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

func badRequest(w http.ResponseWriter, err error) int {
	writeJSON(w, http.StatusBadRequest, map[string]any{
		"type":  "error",
		"error": map[string]any{"type": "invalid_request_error", "message": fmt.Sprintf("fakemodel: %v", err)},
	})
	return -1
}

// authorized checks the request's key against Script.APIKey.
func (s *Server) authorized(r *http.Request) bool {
	if s.script.APIKey == "" {
		return true
	}
	if r.Header.Get("x-api-key") == s.script.APIKey {
		return true
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && tok == s.script.APIKey
}

// Unauthorized counts the requests refused for a missing or wrong key.
func (s *Server) Unauthorized() int {
	n := 0
	for _, r := range s.Requests() {
		if r.Unauthorized {
			n++
		}
	}
	return n
}
