package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// toolScript is an agent, scripted: it speaks MCP to the daemon's tools
// endpoint with curl (its token from the workspace's secrets, so from its
// environment), saves a named checkpoint in the middle of its own run,
// changes the file, lists the checkpoints and forks from the saved one.
// Each reply is one output line.
const toolScript = `set -e
echo one > f.txt
call() { curl -sS -X POST -H 'Content-Type: application/json' -H "Authorization: Bearer $CORRAL_TOKEN" --data "$1" "$CORRAL_TOOLS"; echo; }
call '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"script","version":"1"}}}'
call '{"jsonrpc":"2.0","method":"notifications/initialized"}'
call '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
call '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"save_checkpoint","arguments":{"label":"mid-run"}}}'
echo two > f.txt
call '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"list_checkpoints","arguments":{}}}'
call '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"fork_checkpoint","arguments":{}}}'
call '{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"fork_checkpoint","arguments":{"threadId":"elsewhere"}}}'
call '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"rm_rf","arguments":{}}}'
`

type rpcReply struct {
	ID     int             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code int `json:"code"`
	} `json:"error"`
}

type toolResult struct {
	Content []struct{ Text string } `json:"content"`
	IsError bool                    `json:"isError"`
}

// TestCheckpointTools: the agent of a live run saves, lists and forks
// checkpoints through the MCP tools, on its own thread only.
func TestCheckpointTools(t *testing.T) {
	const token, other = "tools-token", "other-token"
	secrets, err := sandbox.NewSecrets(map[string]string{"CORRAL_TOKEN": token})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{Tokens: map[string]string{token: "acme", other: "beta"}, Workspace: &sandbox.Workspace{Secrets: secrets}})
	const runID, thread = "run-tools", "tools-thread"
	c := testCtx(t, 2*time.Minute)
	if _, err := e.Runner.Start(c, run.StartRequest{ID: runID, Tenant: "acme", Definition: "default", Thread: thread, Harness: command.Name,
		Prompt: toolScript, Env: map[string]string{"CORRAL_TOOLS": e.URL + "/v1/runs/" + runID + "/mcp"}}); err != nil {
		t.Fatal(err)
	}
	rec := e.waitStatus(runID, store.RunCompleted, time.Minute)
	evs, err := e.Store.ReadEvents(c, runID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var payloads []string
	for _, ev := range evs {
		payloads = append(payloads, string(ev.Data))
	}
	replies := map[int]rpcReply{}
	for _, l := range textLines(t, payloads) {
		if strings.TrimSpace(l) == "" {
			continue // the notification's 202 has no body
		}
		var r rpcReply
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("reply %q: %v", l, err)
		}
		replies[r.ID] = r
	}
	tool := func(id int) (toolResult, map[string]any) {
		t.Helper()
		var tr toolResult
		if err := json.Unmarshal(replies[id].Result, &tr); err != nil || len(tr.Content) != 1 {
			t.Fatalf("reply %d: %s (%v)", id, replies[id].Result, err)
		}
		var v map[string]any
		_ = json.Unmarshal([]byte(tr.Content[0].Text), &v)
		return tr, v
	}
	if !strings.Contains(string(replies[1].Result), `"name":"corral"`) {
		t.Errorf("initialize: %s", replies[1].Result)
	}
	for _, name := range []string{"save_checkpoint", "fork_checkpoint", "list_checkpoints"} {
		if !strings.Contains(string(replies[2].Result), `"name":"`+name+`"`) {
			t.Errorf("tools/list lacks %s: %s", name, replies[2].Result)
		}
	}
	saved, sv := tool(3)
	ckID, _ := sv["checkpointId"].(string)
	if saved.IsError || ckID == "" || sv["label"] != "mid-run" {
		t.Fatalf("save_checkpoint: %+v", saved)
	}
	cp, err := e.Store.GetCheckpoint(c, "acme", thread, ckID)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("one\n"))
	if cp.Reason != store.CheckpointNamed || cp.SourceRunID != runID || len(cp.Entries) != 1 || cp.Entries[0].Blob != hex.EncodeToString(sum[:]) {
		t.Fatalf("the saved checkpoint: %+v, want f.txt = one from run %s", cp, runID)
	}
	if listed, _ := tool(4); listed.IsError || !strings.Contains(listed.Content[0].Text, ckID) || !strings.Contains(listed.Content[0].Text, `"head":true`) {
		t.Fatalf("list_checkpoints: %+v", listed)
	}
	forked, fv := tool(5)
	dst, _ := fv["destinationThreadId"].(string)
	if forked.IsError || dst == "" || dst == thread || fv["checkpointId"] != ckID {
		t.Fatalf("fork_checkpoint: %+v", forked)
	}
	root, err := e.Store.ListCheckpoints(c, "acme", dst)
	if err != nil || len(root) != 1 || root[0].Reason != store.CheckpointForkRoot || root[0].SourceCheckpointID != ckID {
		t.Fatalf("the fork %s: %+v (%v)", dst, root, err)
	}
	if bad, _ := tool(6); !bad.IsError || !strings.Contains(bad.Content[0].Text, "threadId") {
		t.Errorf("a thread id from the model: %+v, want refused", bad)
	}
	if bad, _ := tool(7); !bad.IsError || !strings.Contains(bad.Content[0].Text, "no such tool") {
		t.Errorf("an unknown tool: %+v", bad)
	}
	// After the run: no tools. Another tenant: no run.
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	if resp, body := do(t, e.URL, request{Method: "POST", Path: "/v1/runs/" + runID + "/mcp", Body: list, Token: token}); resp.StatusCode != http.StatusPreconditionFailed {
		t.Errorf("tools of an ended run: %d %s, want 412", resp.StatusCode, body)
	}
	if resp, body := do(t, e.URL, request{Method: "POST", Path: "/v1/runs/" + runID + "/mcp", Body: list, Token: other}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("another tenant's call: %d %s, want 404", resp.StatusCode, body)
	}
	t.Logf("run %s (%s): saved %s mid-run, listed it as head, forked it into %s; a model thread id and an unknown tool refused; 412 after the run, 404 for another tenant",
		runID, rec.Status, ckID, dst)
}
