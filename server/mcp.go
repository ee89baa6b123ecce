package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// The checkpoint tools, for the agent of a live run: an MCP server
// (streamable HTTP, JSON replies, no sessions) at POST /v1/runs/{id}/mcp,
// behind the same token and guard as the rest of the API. The tools act
// on the run's own thread: the model never names a thread.

// Tool names.
const (
	ToolSaveCheckpoint  = "save_checkpoint"
	ToolForkCheckpoint  = "fork_checkpoint"
	ToolListCheckpoints = "list_checkpoints"
)

type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type mcpTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

var checkpointTools = []mcpTool{
	{ToolSaveCheckpoint, "Save a checkpoint of this thread's workspace files (and conversation) under a label; the thread can come back to it, or be forked from it.",
		json.RawMessage(`{"type":"object","properties":{"label":{"type":"string","description":"a short name for the checkpoint"}},"additionalProperties":false}`)},
	{ToolForkCheckpoint, "Start a new thread from a checkpoint of this thread (default: the newest); this thread is not changed. Returns the new thread's id.",
		json.RawMessage(`{"type":"object","properties":{"checkpointId":{"type":"string","description":"the checkpoint to fork from; omit for the newest"}},"additionalProperties":false}`)},
	{ToolListCheckpoints, "List this thread's checkpoints, oldest first, with their ids, labels, reasons and times.",
		json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)},
}

// toolsMCP serves POST /v1/runs/{id}/mcp for the run's agent while the run
// is live.
func (s *Server) toolsMCP(w http.ResponseWriter, r *http.Request) {
	rec, err := s.run(r, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if rec.Status.Terminal() {
		s.fail(w, r, sandbox.Errorf(sandbox.FailedPrecondition, "mcp", rec.ID, "the run has ended: its tools are gone"))
		return
	}
	var req rpcRequest
	if !s.decodeBody(w, r, &req, "a JSON-RPC request") {
		return
	}
	if strings.HasPrefix(req.Method, "notifications/") || req.ID == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	resp := rpcResponse{JSONRPC: "2.0", ID: req.ID}
	switch req.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(req.Params, &p)
		if p.ProtocolVersion == "" {
			p.ProtocolVersion = "2025-03-26"
		}
		resp.Result = map[string]any{"protocolVersion": p.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]string{"name": "corral", "version": "1"}}
	case "ping":
		resp.Result = map[string]any{}
	case "tools/list":
		resp.Result = map[string]any{"tools": checkpointTools}
	case "tools/call":
		var p struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(req.Params, &p); err != nil {
			resp.Error = &rpcError{-32602, "invalid params: " + err.Error()}
			break
		}
		out, err := s.callTool(context.WithoutCancel(r.Context()), rec, p.Name, p.Arguments)
		if err != nil {
			resp.Result = map[string]any{"content": []map[string]string{{"type": "text", "text": err.Error()}}, "isError": true}
			break
		}
		text, _ := json.Marshal(out)
		resp.Result = map[string]any{"content": []map[string]string{{"type": "text", "text": string(text)}}}
	default:
		resp.Error = &rpcError{-32601, "method not found: " + req.Method}
	}
	writeJSON(w, http.StatusOK, resp)
}

// callTool runs one checkpoint tool for the run's thread.
func (s *Server) callTool(ctx context.Context, rec store.Run, name string, args json.RawMessage) (any, error) {
	var a struct {
		Label        string `json:"label"`
		CheckpointID string `json:"checkpointId"`
	}
	if len(args) > 0 && string(args) != "null" {
		dec := json.NewDecoder(strings.NewReader(string(args)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, "mcp", name, "bad arguments: %v", err)
		}
	}
	switch name {
	case ToolSaveCheckpoint:
		res, err := s.opts.Runner.Save(ctx, run.SaveCheckpoint{Tenant: rec.Tenant, Thread: rec.ThreadID, Label: a.Label, DuringRun: rec.ID})
		if err != nil {
			return nil, err
		}
		return map[string]any{"checkpointId": res.Checkpoint.ID, "label": res.Checkpoint.Label, "files": len(res.Checkpoint.Entries), "bytes": res.Checkpoint.Bytes}, nil
	case ToolForkCheckpoint:
		cp, err := s.opts.Runner.Fork(ctx, rec.Tenant, rec.ThreadID, a.CheckpointID, "")
		if err != nil {
			return nil, err
		}
		return map[string]string{"checkpointId": cp.SourceCheckpointID, "destinationThreadId": cp.ThreadID}, nil
	case ToolListCheckpoints:
		cps, head, err := s.opts.Runner.Checkpoints(ctx, rec.Tenant, rec.ThreadID)
		if err != nil {
			return nil, err
		}
		return map[string]any{"checkpoints": checkpointItems(cps, head)}, nil
	}
	return nil, sandbox.Errorf(sandbox.NotFound, "mcp", name, "no such tool")
}
