package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// anthropicRequest is the part of a Messages API request the fake reads.
type anthropicRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role string `json:"role"`
	} `json:"messages"`
	Tools []struct {
		Name        string         `json:"name"`
		InputSchema map[string]any `json:"input_schema"`
	} `json:"tools"`
}

// anthropicTurn is the number of model replies in the conversation: runs
// of consecutive assistant messages.
func anthropicTurn(req anthropicRequest) int {
	n, prev := 0, ""
	for _, m := range req.Messages {
		if m.Role == "assistant" && prev != "assistant" {
			n++
		}
		prev = m.Role
	}
	return n
}

func (s *Server) anthropicMessages(w http.ResponseWriter, r *http.Request, body []byte) int {
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return badRequest(w, err)
	}
	tools := make([]tool, 0, len(req.Tools))
	for _, t := range req.Tools {
		tools = append(tools, tool{name: t.Name, schema: t.InputSchema})
	}
	rp := s.resolve(anthropicTurn(req), tools)
	if rp.err != nil {
		writeJSON(w, rp.err.Status, map[string]any{"type": "error", "error": map[string]any{"type": rp.err.Type, "message": rp.err.Message}})
		return rp.turn
	}
	id := fmt.Sprintf("msg_fake_%d", rp.turn)
	if rp.turn < 0 {
		id = "msg_fake_side"
	}
	stop := "end_turn"
	if rp.tool != nil {
		stop = "tool_use"
	}
	in, out := tokens(len(body)), tokens(len(rp.thinking)+len(rp.text))
	if rp.tool != nil {
		out += tokens(len(rp.tool.input))
	}
	usage := func(outTokens int) map[string]any {
		return map[string]any{"input_tokens": in, "output_tokens": outTokens, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	}
	toolID := fmt.Sprintf("toolu_fake_%d", rp.turn)
	if !req.Stream {
		var content []any
		if rp.thinking != "" {
			content = append(content, map[string]any{"type": "thinking", "thinking": rp.thinking, "signature": fakeSignature})
		}
		if rp.text != "" {
			content = append(content, map[string]any{"type": "text", "text": rp.text})
		}
		if rp.tool != nil {
			content = append(content, map[string]any{"type": "tool_use", "id": toolID, "name": rp.tool.name, "input": json.RawMessage(rp.tool.input)})
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": content,
			"stop_reason": stop, "stop_sequence": nil, "usage": usage(out),
		})
		return rp.turn
	}
	e := s.newSSE(w, r)
	ev := func(v map[string]any) { e.event(v["type"].(string), mustJSON(v)) }
	ev(map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usage(1),
	}})
	ev(map[string]any{"type": "ping"})
	index := 0
	block := func(start map[string]any, deltaType, field string, parts []string, extra ...map[string]any) {
		ev(map[string]any{"type": "content_block_start", "index": index, "content_block": start})
		for _, p := range parts {
			ev(map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": deltaType, field: p}})
		}
		for _, d := range extra {
			ev(map[string]any{"type": "content_block_delta", "index": index, "delta": d})
		}
		ev(map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	if rp.thinking != "" {
		block(map[string]any{"type": "thinking", "thinking": "", "signature": ""}, "thinking_delta", "thinking",
			chunks(rp.thinking, s.script.ChunkSize), map[string]any{"type": "signature_delta", "signature": fakeSignature})
	}
	if rp.text != "" {
		block(map[string]any{"type": "text", "text": ""}, "text_delta", "text", chunks(rp.text, s.script.ChunkSize))
	}
	if rp.tool != nil {
		block(map[string]any{"type": "tool_use", "id": toolID, "name": rp.tool.name, "input": map[string]any{}},
			"input_json_delta", "partial_json", chunks(rp.tool.input, s.script.ChunkSize))
	}
	ev(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": out}})
	ev(map[string]any{"type": "message_stop"})
	return rp.turn
}

// fakeSignature is the signature of every thinking block.
const fakeSignature = "ZmFrZW1vZGVsLXNpZ25hdHVyZQ=="
