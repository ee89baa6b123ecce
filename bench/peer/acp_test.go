//go:build peerbench

package peer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// acpConn is one ACP connection to sandbox-agent over its HTTP transport
// (what its SDK's acp-http-client does): JSON-RPC envelopes POSTed to
// /v1/acp/{server}, the first with ?agent=NAME (which starts the agent's
// ACP adapter), and everything the agent sends — notifications, its own
// requests, and responses — on the SSE stream GET /v1/acp/{server}.
type acpConn struct {
	base, server, agent string
	hc                  *http.Client

	mu      sync.Mutex
	next    int
	pending map[string]chan rpcReply
	posted  bool
	// onUpdate sees every session/update notification's update.
	onUpdate func(kind string, update json.RawMessage)
	stop     context.CancelFunc
	sseDone  chan struct{}
	// deleteStatus and deleteTook: how close's DELETE went (0: no answer
	// within deleteWait).
	deleteStatus int
	deleteTook   time.Duration
}

type rpcReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type envelope struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	rpcReply
}

func newACP(base, server, agent string) *acpConn {
	return &acpConn{base: base, server: server, agent: agent, hc: &http.Client{}, pending: map[string]chan rpcReply{}}
}

func (c *acpConn) url(bootstrap bool) string {
	u := c.base + "/v1/acp/" + url.PathEscape(c.server)
	if bootstrap {
		u += "?agent=" + url.QueryEscape(c.agent)
	}
	return u
}

// call sends a request and waits for its response (from the POST's body
// or the SSE stream, whichever comes first).
func (c *acpConn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	c.mu.Lock()
	c.next++
	id := fmt.Sprint(c.next)
	ch := make(chan rpcReply, 2)
	c.pending[id] = ch
	bootstrap := !c.posted
	c.posted = true
	c.mu.Unlock()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.next, "method": method, "params": params})
	if err != nil {
		return nil, err
	}
	errc := make(chan error, 1)
	go func() { errc <- c.post(ctx, c.url(bootstrap), body) }()
	if bootstrap {
		// The stream exists once the first POST has made the server.
		if err := <-errc; err != nil {
			return nil, err
		}
		errc = nil
		c.startSSE()
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return nil, fmt.Errorf("%s: %d %s", method, r.Error.Code, r.Error.Message)
		}
		return r.Result, nil
	case err := <-errc:
		if err != nil {
			return nil, err
		}
		select {
		case r := <-ch:
			if r.Error != nil {
				return nil, fmt.Errorf("%s: %d %s", method, r.Error.Code, r.Error.Message)
			}
			return r.Result, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// post sends one envelope; a 200 answer carries a response envelope.
func (c *acpConn) post(ctx context.Context, u string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return &httpStatusError{status: resp.StatusCode, body: strings.TrimSpace(string(b))}
	}
	if resp.StatusCode == http.StatusOK && len(bytes.TrimSpace(b)) > 0 {
		c.inbound(b)
	}
	return nil
}

type httpStatusError struct {
	status int
	body   string
}

func (e *httpStatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.body) }

func (c *acpConn) startSSE() {
	ctx, cancel := context.WithCancel(context.Background())
	c.stop = cancel
	c.sseDone = make(chan struct{})
	ready := make(chan struct{})
	go func() {
		defer close(c.sseDone)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.url(false), nil)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := c.hc.Do(req)
		close(ready)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64*1024), 16<<20)
		var data []byte
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if len(data) > 0 {
					c.inbound(data)
				}
				data = nil
			case strings.HasPrefix(line, "data:"):
				if data != nil {
					data = append(data, '\n')
				}
				data = append(data, strings.TrimPrefix(line[5:], " ")...)
			}
		}
	}()
	<-ready
}

// inbound routes one envelope from the agent.
func (c *acpConn) inbound(b []byte) {
	var e envelope
	if json.Unmarshal(b, &e) != nil {
		return
	}
	switch {
	case e.Method == "session/update":
		var p struct {
			Update json.RawMessage `json:"update"`
		}
		_ = json.Unmarshal(e.Params, &p)
		var k struct {
			Kind string `json:"sessionUpdate"`
		}
		_ = json.Unmarshal(p.Update, &k)
		c.mu.Lock()
		fn := c.onUpdate
		c.mu.Unlock()
		if fn != nil {
			fn(k.Kind, p.Update)
		}
	case e.Method != "" && len(e.ID) > 0:
		// The agent asks something (a permission): the scripts here call
		// no tools, so refuse whatever it is.
		reply, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": e.ID, "result": map[string]any{"outcome": map[string]any{"outcome": "cancelled"}}})
		go func() { _ = c.post(context.Background(), c.url(false), reply) }()
	case len(e.ID) > 0:
		id := strings.Trim(string(e.ID), `"`)
		c.mu.Lock()
		ch := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ch != nil {
			ch <- e.rpcReply
		}
	}
}

// open initializes the connection (starting the agent's adapter) and
// makes a session in cwd, returning its id.
func (c *acpConn) open(ctx context.Context, cwd string) (string, error) {
	init, err := c.call(ctx, "initialize", map[string]any{
		"protocolVersion":    1,
		"clientCapabilities": map[string]any{},
		"clientInfo":         map[string]any{"name": "corral-peer-bench", "version": "v1"},
	})
	if err != nil {
		return "", err
	}
	var ir struct {
		AuthMethods []struct {
			ID string `json:"id"`
		} `json:"authMethods"`
	}
	_ = json.Unmarshal(init, &ir)
	for _, m := range ir.AuthMethods {
		// What the SDK does: authenticate with an environment key when
		// the agent offers that.
		if m.ID == "codex-api-key" || m.ID == "openai-api-key" || m.ID == "anthropic-api-key" {
			_, _ = c.call(ctx, "authenticate", map[string]any{"methodId": m.ID})
			break
		}
	}
	res, err := c.call(ctx, "session/new", map[string]any{"cwd": cwd, "mcpServers": []any{}})
	if err != nil {
		return "", err
	}
	var sr struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(res, &sr); err != nil || sr.SessionID == "" {
		return "", fmt.Errorf("session/new answered %s", res)
	}
	return sr.SessionID, nil
}

// prompt sends one prompt and returns when the turn ends.
func (c *acpConn) prompt(ctx context.Context, session, text string) (json.RawMessage, error) {
	return c.call(ctx, "session/prompt", map[string]any{
		"sessionId": session,
		"prompt":    []any{map[string]any{"type": "text", "text": text}},
	})
}

func (c *acpConn) setOnUpdate(fn func(kind string, update json.RawMessage)) {
	c.mu.Lock()
	c.onUpdate = fn
	c.mu.Unlock()
}

// close ends the connection (DELETE stops the adapter; like the SDK it
// waits 2 s at most for the answer) and its stream.
func (c *acpConn) close() {
	ctx, cancel := context.WithTimeout(context.Background(), deleteWait)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, c.url(false), nil)
	t0 := time.Now()
	if resp, err := c.hc.Do(req); err == nil {
		resp.Body.Close()
		c.deleteStatus = resp.StatusCode
	}
	c.deleteTook = time.Since(t0)
	if c.stop != nil {
		c.stop()
		<-c.sseDone
	}
}

// deleteWait bounds the DELETE of a connection: the SDK's 2 s
// (PEER_DELETE_WAIT overrides it, to see what a longer wait changes).
var deleteWait = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("PEER_DELETE_WAIT")); err == nil {
		return d
	}
	return 2 * time.Second
}()
