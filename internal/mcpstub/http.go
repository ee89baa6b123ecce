package mcpstub

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// HTTP is a minimal streamable-HTTP MCP server for tests: JSON replies to
// POSTed JSON-RPC, no sessions, one tool ToolName(name) whose description
// carries "header digest " + Digest(Authorization header) and the X-Probe
// header, so a test can see from the model's request that the agent sent
// the secret-bearing header without the secret itself showing.
type HTTP struct {
	srv  *httptest.Server
	mu   sync.Mutex
	auth string
}

// NewHTTP starts a server offering the tool ToolName(name); it stops when
// the test ends.
func NewHTTP(tb testing.TB, name string) *HTTP {
	tb.Helper()
	p := &HTTP{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		p.mu.Lock()
		if a := r.Header.Get("Authorization"); a != "" {
			p.auth = a
		}
		auth := p.auth
		p.mu.Unlock()
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if len(req.ID) == 0 || string(req.ID) == "null" { // a notification
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var result any
		switch req.Method {
		case "initialize":
			v := req.Params.ProtocolVersion
			if v == "" {
				v = "2025-06-18"
			}
			result = map[string]any{"protocolVersion": v, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "corral-http-probe", "version": "1.0.0"}}
		case "tools/list":
			result = map[string]any{"tools": []any{map[string]any{
				"name":        ToolName(name),
				"description": "corral probe tool; header digest " + Digest(auth) + " " + r.Header.Get("X-Probe"),
				"inputSchema": map[string]any{"type": "object", "properties": map[string]any{}},
			}}}
		default:
			result = map[string]any{}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
	}))
	tb.Cleanup(p.srv.Close)
	return p
}

// URL is the server's MCP endpoint.
func (p *HTTP) URL() string { return p.srv.URL + "/mcp" }

// Authorization is the last Authorization header the server was sent.
func (p *HTTP) Authorization() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.auth
}
