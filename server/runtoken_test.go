package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/server"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/sqlitestore"
)

// projectedScript is an agent, scripted, that has been handed nothing but
// what the runner projects: it reads the corral-tools entry of its MCP
// configuration (the command harness writes it at $CORRAL_MCP_CONFIG),
// takes its Authorization header from the variable the entry references,
// writes it into a workspace file (as the grok-build harness's merged
// config does), saves a checkpoint (which must not keep it), prints its token (the events must not show it), says it
// is ready and waits for the test to let it end.
const projectedScript = `set -e
echo one > f.txt
cfg=$(cat "$CORRAL_MCP_CONFIG")
echo "config: $cfg"
url=$(printf '%s' "$cfg" | sed -n 's/.*"corral-tools":{.*"url":"\([^"]*\)".*/\1/p')
var=$(printf '%s' "$cfg" | sed -n 's/.*"Authorization":"\${\([A-Z0-9_]*\)}".*/\1/p')
auth=$(printenv "$var")
call() { curl -sS -X POST -H 'Content-Type: application/json' -H "Authorization: $auth" --data "$1" "$url"; echo; }
printf '%s' "$auth" > config-with-token.txt
call '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"script","version":"1"}}}'
call '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"save_checkpoint","arguments":{"label":"projected"}}}'
echo "my token: $auth"
touch "$CORRAL_READY"
while [ ! -e "$CORRAL_DONE" ]; do sleep 0.05; done
`

// waitScript keeps a run live until the test lets it end.
const waitScript = `touch "$CORRAL_READY"; while [ ! -e "$CORRAL_DONE" ]; do sleep 0.05; done`

// TestRunTokenTools: the runner hands each run's agent the checkpoint
// tools with a per-run token; the token opens that run's tools and
// nothing else, and is in no store row, event or argv.
func TestRunTokenTools(t *testing.T) {
	const token, other = "tenant-token", "beta-token"
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "corral.db")
	c := testCtx(t, 3*time.Minute)
	sq, err := sqlitestore.Open(c, dbPath, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sq.Close() })
	key := bytes.Repeat([]byte{7}, 32)
	e := newEnv(t, envOptions{Store: sq, Tokens: map[string]string{token: "acme", other: "beta"}, ToolsKey: key})
	done := filepath.Join(dir, "done")
	start := func(id, tenant, script string) string {
		t.Helper()
		ready := filepath.Join(dir, id+".ready")
		if _, err := e.Runner.Start(c, run.StartRequest{ID: id, Tenant: tenant, Definition: "default", Thread: id + "-thread", Harness: command.Name,
			Prompt: script, Env: map[string]string{"CORRAL_READY": ready, "CORRAL_DONE": done}}); err != nil {
			t.Fatal(err)
		}
		return ready
	}
	readies := []string{start("run-a", "acme", projectedScript), start("run-b", "acme", waitScript), start("run-c", "beta", waitScript)}
	for i, r := range readies {
		id := []string{"run-a", "run-b", "run-c"}[i]
		for {
			if _, err := os.Stat(r); err == nil {
				break
			}
			if rec, _, _ := e.Store.GetRun(c, id); rec.Status.Terminal() || c.Err() != nil {
				evs, _ := e.Store.ReadEvents(c, id, 0, 0)
				var text []string
				for _, ev := range evs {
					text = append(text, string(ev.Data))
				}
				t.Fatalf("%s ended (%s: %s) before it was ready: %s", id, rec.Status, rec.Error, strings.Join(text, "\n"))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	recA, _, err := e.Store.GetRun(c, "run-a")
	if err != nil {
		t.Fatal(err)
	}
	tokA := e.Tools.Token(recA)
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	mcp := func(id string) string { return "/v1/runs/" + id + "/mcp" }

	// The token opens its own run's tools.
	if resp, body := do(t, e.URL, request{Method: "POST", Path: mcp("run-a"), Body: list, Token: tokA}); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "save_checkpoint") {
		t.Fatalf("its own run's tools: %d %s", resp.StatusCode, body)
	}
	// Nothing else.
	forged, _ := server.NewAgentTools(bytes.Repeat([]byte{8}, 32), nil, nil)
	refused := []struct {
		name string
		req  request
	}{
		{"another run's tools", request{Method: "POST", Path: mcp("run-b"), Body: list, Token: tokA}},
		{"another tenant's run's tools", request{Method: "POST", Path: mcp("run-c"), Body: list, Token: tokA}},
		{"GET /v1/runs", request{Method: "GET", Path: "/v1/runs", Token: tokA}},
		{"GET /v1/runs?access_token=", request{Method: "GET", Path: "/v1/runs?access_token=" + tokA}},
		{"its own run's record", request{Method: "GET", Path: "/v1/runs/run-a", Token: tokA}},
		{"its own run's events", request{Method: "GET", Path: "/v1/runs/run-a/events", Token: tokA}},
		{"cancelling its own run", request{Method: "POST", Path: "/v1/runs/run-a/cancel", Body: "{}", Token: tokA}},
		{"starting a run", request{Method: "POST", Path: "/v1/runs", Body: `{"prompt":"echo hi","harness":"command"}`, Token: tokA}},
		{"its thread's checkpoints route", request{Method: "POST", Path: "/v1/threads/run-a-thread/checkpoints", Body: "{}", Token: tokA}},
		{"GET /metrics", request{Method: "GET", Path: "/metrics", Token: tokA}},
		{"a token under another key", request{Method: "POST", Path: mcp("run-a"), Body: list, Token: forged.Token(recA)}},
		{"run b's record with run a's id", request{Method: "POST", Path: mcp("run-a"), Body: list, Token: func() string {
			b, _, _ := e.Store.GetRun(c, "run-b")
			b.ID = "run-a"
			return e.Tools.Token(b)
		}()}},
	}
	// One byte changed, anywhere.
	for i := 0; i < len(tokA); i++ {
		b := []byte(tokA)
		b[i] ^= 0x01
		refused = append(refused, struct {
			name string
			req  request
		}{"byte " + strconv.Itoa(i) + " flipped", request{Method: "POST", Path: mcp("run-a"), Body: list, Token: string(b)}})
	}
	for _, tc := range refused {
		resp, body := do(t, e.URL, request{Method: tc.req.Method, Path: tc.req.Path, Body: tc.req.Body, Token: tc.req.Token})
		if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d %s, want 401 or 403", tc.name, resp.StatusCode, body)
		}
	}
	if resp, body := do(t, e.URL, request{Method: "GET", Path: "/v1/runs", Token: tokA}); resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "only for its own run's tools") {
		t.Errorf("a run token on GET /v1/runs: %d %s, want 403 naming what it is good for", resp.StatusCode, body)
	}
	// Another tenant's tenant token does not see the run at all.
	if resp, body := do(t, e.URL, request{Method: "POST", Path: mcp("run-a"), Body: list, Token: other}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("another tenant's token on run a's tools: %d %s, want 404", resp.StatusCode, body)
	}
	// The sandboxes' own address serves the tools route alone, to run
	// tokens alone.
	th := httptest.NewServer(e.Server.ToolsHandler())
	t.Cleanup(th.Close)
	if resp, body := do(t, th.URL, request{Method: "POST", Path: mcp("run-a"), Body: list, Token: tokA}); resp.StatusCode != http.StatusOK {
		t.Errorf("the tools address, run token: %d %s", resp.StatusCode, body)
	}
	for _, tc := range []request{
		{Method: "POST", Path: mcp("run-a"), Body: list, Token: token},
		{Method: "GET", Path: "/v1/runs", Token: token},
		{Method: "GET", Path: "/v1/runs", Token: tokA},
	} {
		if resp, body := do(t, th.URL, tc); resp.StatusCode == http.StatusOK {
			t.Errorf("the tools address, %s %s: %d %s, want refused", tc.Method, tc.Path, resp.StatusCode, body)
		}
	}
	// No process's argv holds the token.
	if procs, err := filepath.Glob("/proc/[0-9]*/cmdline"); err == nil {
		for _, p := range procs {
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(tokA)) {
				t.Errorf("%s holds the run token", p)
			}
		}
	}

	if err := os.WriteFile(done, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"run-a", "run-b", "run-c"} {
		e.waitStatus(id, store.RunCompleted, time.Minute)
	}
	if resp, body := do(t, e.URL, request{Method: "POST", Path: mcp("run-a"), Body: list, Token: tokA}); resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "ended") {
		t.Errorf("the token after its run ended: %d %s, want 403", resp.StatusCode, body)
	}

	// The agent saved through the projected entry, with nothing else.
	evs, err := e.Store.ReadEvents(c, "run-a", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var payloads []string
	for _, ev := range evs {
		payloads = append(payloads, string(ev.Data))
		if bytes.Contains(ev.Data, []byte(tokA)) {
			t.Errorf("event %d holds the run token: %s", ev.Seq, ev.Data)
		}
	}
	var saved, config, printed string
	for _, l := range textLines(t, payloads) {
		switch {
		case strings.Contains(l, `"id":3`):
			saved = l
		case strings.HasPrefix(l, "config: "):
			config = l
		case strings.HasPrefix(l, "my token: "):
			printed = l
		}
	}
	if !strings.Contains(config, `"corral-tools"`) || !strings.Contains(config, `"Authorization":"${CORRAL_MCP_VALUE_`) {
		t.Errorf("the projected configuration: %q", config)
	}
	if printed != "my token: Bearer [secret:"+run.AgentToolsTokenSecret+"]" {
		t.Errorf("the token the agent printed reached the events as %q", printed)
	}
	var reply struct {
		Result struct {
			Content []struct{ Text string } `json:"content"`
			IsError bool                    `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(saved), &reply); err != nil || reply.Result.IsError || len(reply.Result.Content) != 1 {
		t.Fatalf("save_checkpoint through the projected entry: %q (%v)", saved, err)
	}
	cps, err := e.Store.ListCheckpoints(c, "acme", "run-a-thread")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, cp := range cps {
		found = found || (cp.Label == "projected" && cp.SourceRunID == "run-a")
	}
	if !found {
		t.Fatalf("no checkpoint labelled projected on run a's thread: %+v", cps)
	}
	// Nor any table: the store's files hold neither the token nor its MAC.
	mac := tokA[strings.LastIndex(tokA, ".")+1:]
	files, _ := filepath.Glob(dbPath + "*")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(tokA)) || bytes.Contains(b, []byte(mac)) {
			t.Errorf("%s holds the run token", f)
		}
	}
	t.Logf("run a saved %q through its projected corral-tools entry; its token refused on %d other requests (other runs, other routes, %d one-byte changes, another key), after the run, on the tools address with a tenant token; absent from %d events, %d store files and argv",
		"projected", len(refused), len(tokA), len(evs), len(files))
}
