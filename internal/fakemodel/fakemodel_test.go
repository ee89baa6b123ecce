package fakemodel_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/fakemodel"
)

// post sends a JSON body and returns the status and the raw reply.
func post(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

type sseEvent struct {
	name string
	data map[string]any
	raw  string
}

// parseSSE splits a stream into events; "[DONE]" comes back as raw data.
func parseSSE(t *testing.T, b []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.raw = strings.TrimPrefix(line, "data: ")
			if cur.raw != "[DONE]" {
				if err := json.Unmarshal([]byte(cur.raw), &cur.data); err != nil {
					t.Fatalf("bad event data %q: %v", cur.raw, err)
				}
			}
		case line == "":
			out = append(out, cur)
			cur = sseEvent{}
		}
	}
	return out
}

func str(v any) string { s, _ := v.(string); return s }

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

// anthropicStream reassembles a Messages stream: text, thinking, the tool
// call (name and input) and the stop reason.
func anthropicStream(t *testing.T, evs []sseEvent) (text, thinking, toolName, toolInput, stop string) {
	t.Helper()
	if len(evs) == 0 || evs[0].name != "message_start" || evs[len(evs)-1].name != "message_stop" {
		t.Fatalf("stream does not run message_start … message_stop: %+v", evs)
	}
	for _, e := range evs {
		if e.name != str(e.data["type"]) {
			t.Errorf("event name %q but type %q", e.name, e.data["type"])
		}
		switch e.name {
		case "content_block_start":
			if cb := obj(e.data["content_block"]); cb["type"] == "tool_use" {
				toolName = str(cb["name"])
			}
		case "content_block_delta":
			d := obj(e.data["delta"])
			switch d["type"] {
			case "text_delta":
				text += str(d["text"])
			case "thinking_delta":
				thinking += str(d["thinking"])
			case "input_json_delta":
				toolInput += str(d["partial_json"])
			}
		case "message_delta":
			stop = str(obj(e.data["delta"])["stop_reason"])
		}
	}
	return
}

const bashTool = `{"name":"Bash","description":"run","input_schema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}}`

func TestAnthropicRunCommandThenSay(t *testing.T) {
	srv := fakemodel.New(t, fakemodel.RunCommandThenSay("echo hello > made.txt", "done, the file is made"))
	first := `{"model":"m","stream":true,"tools":[` + bashTool + `],"messages":[{"role":"user","content":"go"}]}`
	code, b := post(t, srv.URL+"/v1/messages?beta=true", first)
	if code != 200 {
		t.Fatalf("status %d: %s", code, b)
	}
	text, _, name, input, stop := anthropicStream(t, parseSSE(t, b))
	if text != "" || name != "Bash" || input != `{"command":"echo hello > made.txt"}` || stop != "tool_use" {
		t.Errorf("turn 1: text %q tool %q input %q stop %q", text, name, input, stop)
	}
	// The same request again: the same bytes.
	if _, again := post(t, srv.URL+"/v1/messages", first); !bytes.Equal(again, b) {
		t.Errorf("the same request streamed different bytes")
	}
	second := `{"model":"m","stream":true,"tools":[` + bashTool + `],"messages":[{"role":"user","content":"go"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_fake_0","name":"Bash","input":{"command":"echo hello > made.txt"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_fake_0","content":""}]}]}`
	_, b = post(t, srv.URL+"/v1/messages", second)
	text, _, name, _, stop = anthropicStream(t, parseSSE(t, b))
	if text != "done, the file is made" || name != "" || stop != "end_turn" {
		t.Errorf("turn 2: text %q tool %q stop %q", text, name, stop)
	}
	reqs := srv.ModelRequests()
	if len(reqs) != 3 || reqs[0].Turn != 0 || reqs[2].Turn != 1 || reqs[0].Query != "beta=true" {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestAnthropicThinkingAndNonStreaming(t *testing.T) {
	srv := fakemodel.New(t, fakemodel.ThinkThenSay("let me think about ünïcode", "answer"))
	_, b := post(t, srv.URL+"/v1/messages", `{"model":"m","stream":true,"messages":[{"role":"user","content":"q"}]}`)
	evs := parseSSE(t, b)
	text, thinking, _, _, stop := anthropicStream(t, evs)
	if text != "answer" || thinking != "let me think about ünïcode" || stop != "end_turn" {
		t.Errorf("text %q thinking %q stop %q", text, thinking, stop)
	}
	var sig bool
	for _, e := range evs {
		if d := obj(e.data["delta"]); d["type"] == "signature_delta" && d["signature"] != "" {
			sig = true
		}
	}
	if !sig {
		t.Error("the thinking block has no signature")
	}
	code, b := post(t, srv.URL+"/v1/messages", `{"model":"m","messages":[{"role":"user","content":"q"}]}`)
	var msg struct {
		Type       string `json:"type"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type, Text, Thinking string
		} `json:"content"`
	}
	if err := json.Unmarshal(b, &msg); err != nil || code != 200 {
		t.Fatalf("%d %s: %v", code, b, err)
	}
	if msg.Type != "message" || len(msg.Content) != 2 || msg.Content[0].Thinking != "let me think about ünïcode" || msg.Content[1].Text != "answer" {
		t.Errorf("non-streaming reply %s", b)
	}
}

func TestAnthropicErrorSideRequestsAndProbes(t *testing.T) {
	srv := fakemodel.New(t, fakemodel.Script{Turns: []fakemodel.Turn{
		{Command: "ls"},
		{Error: &fakemodel.APIError{Status: 400, Type: "invalid_request_error", Message: "scripted failure"}},
	}})
	// A request without tools while the turn needs one is a side request.
	_, b := post(t, srv.URL+"/v1/messages", `{"model":"small","stream":true,"messages":[{"role":"user","content":"title?"}]}`)
	if text, _, _, _, _ := anthropicStream(t, parseSSE(t, b)); text != "OK" {
		t.Errorf("side request answered %q", text)
	}
	code, b := post(t, srv.URL+"/v1/messages", `{"model":"m","stream":true,"tools":[`+bashTool+`],"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"x"},{"role":"user","content":"b"}]}`)
	if code != 400 || !strings.Contains(string(b), `"type":"error"`) || !strings.Contains(string(b), "scripted failure") {
		t.Errorf("error turn: %d %s", code, b)
	}
	// Past the script's end.
	_, b = post(t, srv.URL+"/v1/messages", `{"model":"m","messages":[{"role":"assistant","content":"1"},{"role":"user","content":"2"},{"role":"assistant","content":"3"},{"role":"user","content":"4"}]}`)
	if !strings.Contains(string(b), "script exhausted") {
		t.Errorf("exhausted script: %s", b)
	}
	code, b = post(t, srv.URL+"/v1/messages/count_tokens", `{"model":"m","messages":[]}`)
	if code != 200 || !strings.Contains(string(b), `"input_tokens"`) {
		t.Errorf("count_tokens: %d %s", code, b)
	}
	req, _ := http.NewRequest(http.MethodHead, srv.URL+"/api/hello", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Errorf("HEAD /api/hello: %v %v", resp, err)
	}
	code, _ = post(t, srv.URL+"/v1/unknown", `{}`)
	if code != 404 {
		t.Errorf("unknown endpoint: %d", code)
	}
	var unhandled int
	for _, r := range srv.Requests() {
		if !r.Handled {
			unhandled++
			if r.Path != "/v1/unknown" {
				t.Errorf("unhandled %s", r.Path)
			}
		}
	}
	if unhandled != 1 {
		t.Errorf("%d unhandled requests recorded, want 1", unhandled)
	}
	if code, _ := post(t, srv.URL+"/v1/messages", `not json`); code != 400 {
		t.Errorf("bad JSON: %d", code)
	}
}

func TestShellToolArguments(t *testing.T) {
	for _, tt := range []struct {
		name, tools, want string
	}{
		{"codex exec_command", `[{"type":"function","name":"exec_command","parameters":{"type":"object","properties":{"cmd":{"type":"string"}}}}]`, `{"cmd":"ls -la"}`},
		{"argv shell", `[{"type":"function","name":"shell","parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}}}}]`, `{"command":["bash","-lc","ls -la"]}`},
		{"namespaced", `[{"type":"namespace","name":"ns","tools":[{"type":"function","name":"bash","parameters":{"type":"object","properties":{"command":{"type":"string"}}}}]}]`, `{"command":"ls -la"}`},
		{"preference order", `[{"type":"function","name":"terminal","parameters":{}},{"type":"function","name":"shell","parameters":{"type":"object","properties":{"command":{"type":"string"}}}}]`, `{"command":"ls -la"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakemodel.New(t, fakemodel.RunCommandThenSay("ls -la", "ok"))
			code, b := post(t, srv.OpenAIURL()+"/responses", `{"model":"m","tools":`+tt.tools+`,"input":"go"}`)
			var resp struct {
				Output []struct {
					Type, Name, Arguments, CallID string
				} `json:"output"`
			}
			if err := json.Unmarshal(b, &resp); err != nil || code != 200 {
				t.Fatalf("%d %s %v", code, b, err)
			}
			if len(resp.Output) != 1 || resp.Output[0].Type != "function_call" || resp.Output[0].Arguments != tt.want {
				t.Errorf("output %s, want arguments %s", b, tt.want)
			}
		})
	}
}

// responsesStream reassembles a Responses stream.
func responsesStream(t *testing.T, evs []sseEvent) (text, reasoning, fnName, fnArgs string, final map[string]any) {
	t.Helper()
	if len(evs) < 3 || evs[0].name != "response.created" || evs[len(evs)-1].name != "response.completed" {
		t.Fatalf("stream does not run response.created … response.completed")
	}
	for i, e := range evs {
		if e.name != str(e.data["type"]) || e.data["sequence_number"] != float64(i) {
			t.Errorf("event %d: name %q type %q sequence %v", i, e.name, e.data["type"], e.data["sequence_number"])
		}
		switch e.name {
		case "response.output_text.delta":
			text += str(e.data["delta"])
		case "response.reasoning_summary_text.delta":
			reasoning += str(e.data["delta"])
		case "response.output_item.added":
			if it := obj(e.data["item"]); it["type"] == "function_call" {
				fnName = str(it["name"])
			}
		case "response.function_call_arguments.delta":
			fnArgs += str(e.data["delta"])
		case "response.completed":
			final = obj(e.data["response"])
		}
	}
	return
}

const execTool = `{"type":"function","name":"exec_command","parameters":{"type":"object","properties":{"cmd":{"type":"string"}}}}`

func TestResponsesStreaming(t *testing.T) {
	srv := fakemodel.New(t, fakemodel.Script{Turns: []fakemodel.Turn{{Thinking: "plan", Command: "echo hi"}, {Text: "all done"}}})
	first := `{"model":"gpt","stream":true,"tools":[` + execTool + `],"input":[{"type":"message","role":"developer","content":[]},{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]}]}`
	code, b := post(t, srv.OpenAIURL()+"/responses", first)
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	text, reasoning, name, args, final := responsesStream(t, parseSSE(t, b))
	if text != "" || reasoning != "plan" || name != "exec_command" || args != `{"cmd":"echo hi"}` {
		t.Errorf("turn 1: text %q reasoning %q fn %q args %q", text, reasoning, name, args)
	}
	if final["status"] != "completed" || len(final["output"].([]any)) != 2 || obj(final["usage"])["total_tokens"] == nil {
		t.Errorf("response.completed %v", final)
	}
	// The conversation with the call and its output: turn 2.
	second := `{"model":"gpt","stream":true,"tools":[` + execTool + `],"input":[{"type":"message","role":"user","content":[]},` +
		`{"type":"reasoning","summary":[]},{"type":"function_call","call_id":"call_fake_0","name":"exec_command","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"call_fake_0","output":"hi"}]}`
	_, b = post(t, srv.OpenAIURL()+"/responses", second)
	if text, _, name, _, _ = responsesStream(t, parseSSE(t, b)); text != "all done" || name != "" {
		t.Errorf("turn 2: text %q fn %q", text, name)
	}
	// previous_response_id carries the history instead.
	_, b = post(t, srv.OpenAIURL()+"/responses", `{"model":"gpt","stream":true,"previous_response_id":"resp_fake_0","input":[{"type":"function_call_output","call_id":"call_fake_0","output":"hi"}]}`)
	if text, _, _, _, _ = responsesStream(t, parseSSE(t, b)); text != "all done" {
		t.Errorf("with previous_response_id: text %q", text)
	}
	if _, again := post(t, srv.OpenAIURL()+"/responses", first); !bytes.Equal(again, func() []byte { _, b := post(t, srv.OpenAIURL()+"/responses", first); return b }()) {
		t.Error("the same request streamed different bytes")
	}
	code, b = post(t, srv.OpenAIURL()+"/responses", `{"input":5`)
	if code != 400 || !strings.Contains(string(b), `"error"`) {
		t.Errorf("bad request: %d %s", code, b)
	}
}

func TestChatCompletions(t *testing.T) {
	srv := fakemodel.New(t, fakemodel.Script{Turns: []fakemodel.Turn{
		{Thinking: "hmm", Command: "pwd"},
		{Text: "finished"},
		{Error: &fakemodel.APIError{Status: 429, Type: "rate_limit_exceeded", Message: "slow down"}},
	}})
	tools := `[{"type":"function","function":{"name":"bash","parameters":{"type":"object","properties":{"command":{"type":"string"}}}}}]`
	code, b := post(t, srv.OpenAIURL()+"/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"tools":`+tools+`,"messages":[{"role":"user","content":"go"}]}`)
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	evs := parseSSE(t, b)
	var reasoning, args, name, finish string
	var usage bool
	for _, e := range evs {
		if e.raw == "[DONE]" {
			continue
		}
		if e.data["object"] != "chat.completion.chunk" {
			t.Errorf("chunk %v", e.data)
		}
		if e.data["usage"] != nil {
			usage = true
		}
		for _, c := range e.data["choices"].([]any) {
			ch := obj(c)
			if f := str(ch["finish_reason"]); f != "" {
				finish = f
			}
			d := obj(ch["delta"])
			reasoning += str(d["reasoning_content"])
			if tc, ok := d["tool_calls"].([]any); ok {
				fn := obj(obj(tc[0])["function"])
				if n := str(fn["name"]); n != "" {
					name = n
				}
				args += str(fn["arguments"])
			}
		}
	}
	if evs[len(evs)-1].raw != "[DONE]" || !usage || reasoning != "hmm" || name != "bash" || args != `{"command":"pwd"}` || finish != "tool_calls" {
		t.Errorf("stream: done %q usage %v reasoning %q tool %q args %q finish %q", evs[len(evs)-1].raw, usage, reasoning, name, args, finish)
	}
	code, b = post(t, srv.OpenAIURL()+"/chat/completions", `{"model":"m","tools":`+tools+`,"messages":[{"role":"user","content":"go"},{"role":"assistant","tool_calls":[]},{"role":"tool","content":"/w"}]}`)
	var resp struct {
		Choices []struct {
			Message      struct{ Content string }
			FinishReason string `json:"finish_reason"`
		}
	}
	if err := json.Unmarshal(b, &resp); err != nil || code != 200 || resp.Choices[0].Message.Content != "finished" || resp.Choices[0].FinishReason != "stop" {
		t.Errorf("turn 2: %d %s", code, b)
	}
	code, b = post(t, srv.OpenAIURL()+"/chat/completions", `{"model":"m","messages":[{"role":"assistant"},{"role":"tool"},{"role":"assistant"},{"role":"user"}]}`)
	if code != 429 || !strings.Contains(string(b), "slow down") {
		t.Errorf("error turn: %d %s", code, b)
	}
}

// TestDelayAndDisconnect checks that Delay spaces the events out and that
// a client leaving mid-stream does not hold the server up.
func TestDelayAndDisconnect(t *testing.T) {
	srv := fakemodel.New(t, fakemodel.Script{Turns: []fakemodel.Turn{{Text: strings.Repeat("x", 64)}}, Delay: 30 * time.Millisecond, ChunkSize: 4})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(`{"model":"m","stream":true,"messages":[]}`))
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(resp.Body)
	var events int
	for events < 4 {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "event: ") {
			events++
		}
	}
	if took := time.Since(start); took < 80*time.Millisecond {
		t.Errorf("4 events took %v with a 30ms delay", took)
	}
	cancel()
	resp.Body.Close()
	// The full stream has 16 deltas + 6 framing events; a second request
	// still gets all of them.
	srv2 := fakemodel.New(t, fakemodel.Script{Turns: []fakemodel.Turn{{Text: strings.Repeat("x", 64)}}, ChunkSize: 4})
	_, b := post(t, srv2.URL+"/v1/messages", `{"model":"m","stream":true,"messages":[]}`)
	if n := len(parseSSE(t, b)); n != 22 {
		t.Errorf("%d events, want 22", n)
	}
}

func TestModelsList(t *testing.T) {
	srv := fakemodel.New(t, fakemodel.Say("hi"))
	resp, err := http.Get(srv.OpenAIURL() + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct{ ID string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || len(list.Data) != 1 || list.Data[0].ID != fakemodel.ModelID {
		t.Errorf("models: %+v %v", list, err)
	}
}
