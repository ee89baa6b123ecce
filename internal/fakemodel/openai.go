package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// responsesRequest is the part of a Responses API request the fake reads.
type responsesRequest struct {
	Model              string          `json:"model"`
	Stream             bool            `json:"stream"`
	Input              json.RawMessage `json:"input"`
	PreviousResponseID string          `json:"previous_response_id"`
	Tools              []responsesTool `json:"tools"`
}

type responsesTool struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Parameters map[string]any  `json:"parameters"`
	Tools      []responsesTool `json:"tools"` // type "namespace"
}

func flattenResponsesTools(in []responsesTool, out []tool) []tool {
	for _, t := range in {
		switch t.Type {
		case "namespace":
			out = flattenResponsesTools(t.Tools, out)
		case "local_shell":
			out = append(out, tool{name: "local_shell", schema: map[string]any{"localShell": true}})
		default:
			if t.Name != "" {
				out = append(out, tool{name: t.Name, schema: t.Parameters})
			}
		}
	}
	return out
}

// responsesTurn counts the model replies in the input (runs of output
// items: assistant messages, function and shell calls, reasoning), plus
// those behind previous_response_id.
func responsesTurn(req responsesRequest) int {
	n := 0
	if rest, ok := strings.CutPrefix(req.PreviousResponseID, "resp_fake_"); ok {
		if k, err := strconv.Atoi(rest); err == nil {
			n = k + 1
		}
	}
	var items []struct {
		Type string `json:"type"`
		Role string `json:"role"`
	}
	if json.Unmarshal(req.Input, &items) != nil {
		return n // a plain string input
	}
	inReply := false
	for _, it := range items {
		out := false
		switch it.Type {
		case "function_call", "reasoning", "local_shell_call", "custom_tool_call", "web_search_call", "shell_call":
			out = true
		case "message", "":
			out = it.Role == "assistant"
		}
		if out && !inReply {
			n++
		}
		inReply = out
	}
	return n
}

func (s *Server) openAIResponses(w http.ResponseWriter, r *http.Request, body []byte) int {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return openAIBadRequest(w, err)
	}
	rp := s.resolve(responsesTurn(req), flattenResponsesTools(req.Tools, nil))
	if rp.err != nil {
		writeOpenAIError(w, rp.err)
		return rp.turn
	}
	suffix := strconv.Itoa(rp.turn)
	if rp.turn < 0 {
		suffix = "side"
	}
	respID := "resp_fake_" + suffix
	var output []any
	in, out := tokens(len(body)), tokens(len(rp.thinking)+len(rp.text))
	response := func(status string) map[string]any {
		m := map[string]any{"id": respID, "object": "response", "created_at": 0, "status": status, "model": req.Model, "output": output}
		if status == "completed" {
			m["usage"] = map[string]any{
				"input_tokens": in, "input_tokens_details": map[string]any{"cached_tokens": 0},
				"output_tokens": out, "output_tokens_details": map[string]any{"reasoning_tokens": tokens(len(rp.thinking)) - 1},
				"total_tokens": in + out,
			}
		}
		return m
	}
	// Build the output items first: the non-streaming reply is just them.
	type item struct {
		done  map[string]any
		added map[string]any
		parts []string // deltas
	}
	var items []item
	if rp.thinking != "" {
		id := "rs_fake_" + suffix
		items = append(items, item{
			added: map[string]any{"id": id, "type": "reasoning", "summary": []any{}},
			done:  map[string]any{"id": id, "type": "reasoning", "summary": []any{map[string]any{"type": "summary_text", "text": rp.thinking}}},
			parts: chunks(rp.thinking, s.script.ChunkSize),
		})
	}
	if rp.text != "" {
		id := "msg_fake_" + suffix
		items = append(items, item{
			added: map[string]any{"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}},
			done: map[string]any{"id": id, "type": "message", "status": "completed", "role": "assistant",
				"content": []any{map[string]any{"type": "output_text", "text": rp.text, "annotations": []any{}}}},
			parts: chunks(rp.text, s.script.ChunkSize),
		})
	}
	if rp.tool != nil {
		callID := "call_fake_" + suffix
		if rp.tool.name == "local_shell" {
			var args map[string]any
			_ = json.Unmarshal([]byte(rp.tool.input), &args)
			id := "lsh_fake_" + suffix
			action := map[string]any{"type": "exec", "command": args["command"], "env": map[string]any{}}
			items = append(items, item{
				added: map[string]any{"id": id, "type": "local_shell_call", "status": "in_progress", "call_id": callID, "action": action},
				done:  map[string]any{"id": id, "type": "local_shell_call", "status": "completed", "call_id": callID, "action": action},
			})
		} else {
			id := "fc_fake_" + suffix
			added := map[string]any{"id": id, "type": "function_call", "status": "in_progress", "call_id": callID, "name": rp.tool.name, "arguments": ""}
			done := map[string]any{"id": id, "type": "function_call", "status": "completed", "call_id": callID, "name": rp.tool.name, "arguments": rp.tool.input}
			if rp.tool.namespace != "" {
				added["namespace"], done["namespace"] = rp.tool.namespace, rp.tool.namespace
			}
			items = append(items, item{added: added, done: done, parts: chunks(rp.tool.input, s.script.ChunkSize)})
			out += tokens(len(rp.tool.input))
		}
	}
	if !req.Stream {
		for _, it := range items {
			output = append(output, it.done)
		}
		writeJSON(w, http.StatusOK, response("completed"))
		return rp.turn
	}
	e := s.newSSE(w, r)
	seq := 0
	ev := func(v map[string]any) {
		v["sequence_number"] = seq
		seq++
		e.event(v["type"].(string), mustJSON(v))
	}
	output = []any{}
	ev(map[string]any{"type": "response.created", "response": response("in_progress")})
	ev(map[string]any{"type": "response.in_progress", "response": response("in_progress")})
	output = nil
	for i, it := range items {
		ev(map[string]any{"type": "response.output_item.added", "output_index": i, "item": it.added})
		id := it.added["id"]
		switch it.added["type"] {
		case "reasoning":
			ev(map[string]any{"type": "response.reasoning_summary_part.added", "item_id": id, "output_index": i, "summary_index": 0, "part": map[string]any{"type": "summary_text", "text": ""}})
			for _, p := range it.parts {
				ev(map[string]any{"type": "response.reasoning_summary_text.delta", "item_id": id, "output_index": i, "summary_index": 0, "delta": p})
			}
			ev(map[string]any{"type": "response.reasoning_summary_text.done", "item_id": id, "output_index": i, "summary_index": 0, "text": rp.thinking})
			ev(map[string]any{"type": "response.reasoning_summary_part.done", "item_id": id, "output_index": i, "summary_index": 0, "part": map[string]any{"type": "summary_text", "text": rp.thinking}})
		case "message":
			ev(map[string]any{"type": "response.content_part.added", "item_id": id, "output_index": i, "content_index": 0, "part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
			for _, p := range it.parts {
				ev(map[string]any{"type": "response.output_text.delta", "item_id": id, "output_index": i, "content_index": 0, "delta": p, "logprobs": []any{}})
			}
			ev(map[string]any{"type": "response.output_text.done", "item_id": id, "output_index": i, "content_index": 0, "text": rp.text, "logprobs": []any{}})
			ev(map[string]any{"type": "response.content_part.done", "item_id": id, "output_index": i, "content_index": 0, "part": map[string]any{"type": "output_text", "text": rp.text, "annotations": []any{}}})
		case "function_call":
			for _, p := range it.parts {
				ev(map[string]any{"type": "response.function_call_arguments.delta", "item_id": id, "output_index": i, "delta": p})
			}
			ev(map[string]any{"type": "response.function_call_arguments.done", "item_id": id, "output_index": i, "arguments": rp.tool.input})
		}
		ev(map[string]any{"type": "response.output_item.done", "output_index": i, "item": it.done})
		output = append(output, it.done)
	}
	ev(map[string]any{"type": "response.completed", "response": response("completed")})
	return rp.turn
}

// chatRequest is the part of a Chat Completions request the fake reads.
type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role string `json:"role"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string         `json:"name"`
			Parameters map[string]any `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request, body []byte) int {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return openAIBadRequest(w, err)
	}
	n, prev := 0, ""
	for _, m := range req.Messages {
		if m.Role == "assistant" && prev != "assistant" {
			n++
		}
		prev = m.Role
	}
	tools := make([]tool, 0, len(req.Tools))
	for _, t := range req.Tools {
		tools = append(tools, tool{name: t.Function.Name, schema: t.Function.Parameters})
	}
	rp := s.resolve(n, tools)
	if rp.err != nil {
		writeOpenAIError(w, rp.err)
		return rp.turn
	}
	suffix := strconv.Itoa(rp.turn)
	if rp.turn < 0 {
		suffix = "side"
	}
	id := "chatcmpl-fake-" + suffix
	callID := "call_fake_" + suffix
	finish := "stop"
	if rp.tool != nil {
		finish = "tool_calls"
	}
	in, out := tokens(len(body)), tokens(len(rp.thinking)+len(rp.text))
	if rp.tool != nil {
		out += tokens(len(rp.tool.input))
	}
	usage := map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out}
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": rp.text}
		if rp.thinking != "" {
			msg["reasoning_content"] = rp.thinking
		}
		if rp.tool != nil {
			msg["tool_calls"] = []any{map[string]any{"id": callID, "type": "function", "function": map[string]any{"name": rp.tool.name, "arguments": rp.tool.input}}}
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": 0, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage,
		})
		return rp.turn
	}
	e := s.newSSE(w, r)
	chunk := func(delta map[string]any, finishReason any) {
		e.event("", mustJSON(map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": 0, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finishReason}},
		}))
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	for _, p := range chunks(rp.thinking, s.script.ChunkSize) {
		chunk(map[string]any{"reasoning_content": p}, nil)
	}
	for _, p := range chunks(rp.text, s.script.ChunkSize) {
		chunk(map[string]any{"content": p}, nil)
	}
	if rp.tool != nil {
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "id": callID, "type": "function",
			"function": map[string]any{"name": rp.tool.name, "arguments": ""}}}}, nil)
		for _, p := range chunks(rp.tool.input, s.script.ChunkSize) {
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": p}}}}, nil)
		}
	}
	chunk(map[string]any{}, finish)
	if req.StreamOptions.IncludeUsage {
		e.event("", mustJSON(map[string]any{"id": id, "object": "chat.completion.chunk", "created": 0, "model": req.Model, "choices": []any{}, "usage": usage}))
	}
	e.event("", "[DONE]")
	return rp.turn
}

func writeOpenAIError(w http.ResponseWriter, e *APIError) {
	writeJSON(w, e.Status, map[string]any{"error": map[string]any{"message": e.Message, "type": e.Type, "code": e.Type, "param": nil}})
}

func openAIBadRequest(w http.ResponseWriter, err error) int {
	writeOpenAIError(w, &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: fmt.Sprintf("fakemodel: %v", err)})
	return -1
}
