package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// client is a minimal ACP client: it allows everything, serves files from
// a directory and runs no terminals (the turn then reports the failure).
type client struct {
	mu      sync.Mutex
	updates []string
	written map[string]string
}

func (c *client) RequestPermission(_ context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	return acp.RequestPermissionResponse{Outcome: acp.RequestPermissionOutcome{Selected: &acp.RequestPermissionOutcomeSelected{OptionId: p.Options[0].OptionId}}}, nil
}

func (c *client) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := n.Update
	switch {
	case u.AgentMessageChunk != nil:
		c.updates = append(c.updates, "text:"+u.AgentMessageChunk.Content.Text.Text)
	case u.AgentThoughtChunk != nil:
		c.updates = append(c.updates, "thought")
	case u.ToolCall != nil:
		c.updates = append(c.updates, "call:"+string(u.ToolCall.ToolCallId))
	case u.ToolCallUpdate != nil && u.ToolCallUpdate.Status != nil:
		c.updates = append(c.updates, string(u.ToolCallUpdate.ToolCallId)+":"+string(*u.ToolCallUpdate.Status))
	case u.Plan != nil:
		c.updates = append(c.updates, "plan")
	}
	return nil
}

func (c *client) ReadTextFile(_ context.Context, p acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	b, err := os.ReadFile(p.Path)
	return acp.ReadTextFileResponse{Content: string(b)}, err
}

func (c *client) WriteTextFile(_ context.Context, p acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.written[filepath.Base(p.Path)] = p.Content
	return acp.WriteTextFileResponse{}, nil
}

func (c *client) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalCreate)
}

func (c *client) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, nil
}

func (c *client) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, nil
}

func (c *client) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, nil
}

func (c *client) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, nil
}

// TestScriptedTurn plays the script against an in-process client.
func TestScriptedTurn(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "input.txt"), []byte("abc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	toAgent, fromClient := io.Pipe()
	toClient, fromAgent := io.Pipe()
	t.Cleanup(func() { _ = fromClient.Close(); _ = fromAgent.Close() })
	a := &agent{cfg: config{cmd: "true", write: "out.txt", stop: string(acp.StopReasonEndTurn)}, cwd: map[acp.SessionId]string{},
		mcp: map[acp.SessionId][]string{}, cancels: map[acp.SessionId]context.CancelFunc{}, sessions: map[acp.SessionId]bool{}}
	a.conn = acp.NewAgentSideConnection(a, fromAgent, toAgent)
	c := &client{written: map[string]string{}}
	conn := acp.NewClientSideConnection(c, fromClient, toClient)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	s, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: dir, McpServers: []acp.McpServer{}})
	if err != nil || s.SessionId != "sess-1" {
		t.Fatalf("session %q, %v", s.SessionId, err)
	}
	resp, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: s.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("go")}})
	if err != nil || resp.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %+v, %v", resp, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	got := strings.Join(c.updates, " ")
	want := "thought plan text:Working on: go text: input.txt: abc call:call-1 call-1:in_progress call-1:failed call:call-2 call-2:completed text:Done."
	if got != want {
		t.Errorf("updates:\n got %s\nwant %s", got, want)
	}
	if c.written["out.txt"] != "hello from acp\n" {
		t.Errorf("written = %v", c.written)
	}
}
