package codex_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/codex"
	"github.com/d10ffeed/corral/harness/harnesstest"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/sandbox"
)

var capture = flag.Bool("capture", false, "run the real codex against scripted endpoints and rewrite testdata/real-*.jsonl")

// captureCase is one fixture a capture records: its name and the fake
// model's script, and for the real-* ones what else the run gets.
type captureCase struct {
	name   string
	script fakemodel.Script
	policy *sandbox.Policy
	drops  int32  // responses requests cut off before completion
	kill   string // a line after which the capture is cancelled
	resume string // the fixture whose session is resumed
}

// captureBin skips the test unless -capture is given (to record the
// fixtures what names) and returns the real CLI.
func captureBin(t *testing.T, what string) string {
	t.Helper()
	if !*capture {
		t.Skip("run with -capture to record the " + what + " fixtures")
	}
	return testutil.AgentBin(t, "codex")
}

// commonCaptures are the cases both fixture sets record, cold (real-*)
// and warm (app-*).
func commonCaptures() []captureCase {
	apply := "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\nEOF\n"
	return []captureCase{
		{name: "text", script: fakemodel.Say("Hello from the fake model.")},
		{name: "reasoning", script: fakemodel.ThinkThenSay("Let me think about it.", "Thought it through.")},
		{name: "command", script: fakemodel.RunCommandThenSay("echo hello > made.txt", "done")},
		{name: "command-failed", script: fakemodel.RunCommandThenSay("ls /nonexistent-corral", "it is not there")},
		{name: "file-change", script: fakemodel.Script{Turns: []fakemodel.Turn{
			{Tool: &fakemodel.ToolCall{Name: "exec_command", Input: mustJSON(map[string]string{"cmd": apply})}}, {Text: "patched"}}}},
		{name: "turn-failed", script: fakemodel.Script{Turns: []fakemodel.Turn{{Error: &fakemodel.APIError{Status: 400, Type: "invalid_request_error", Message: "The model fake-model does not exist"}}}}},
	}
}

// TestCaptureFixtures records the real-* fixtures: the stdout of the real
// CLI, prepared by the harness, against fakemodel scripts. Workspace paths
// are rewritten to /workspace. Run with -capture, then -update.
func TestCaptureFixtures(t *testing.T) {
	bin := captureBin(t, "real-*")
	cases := append(commonCaptures(),
		captureCase{name: "read-only", script: fakemodel.RunCommandThenSay("echo hello > made.txt", "could not write"), policy: &sandbox.Policy{FileWrite: sandbox.Deny}},
		captureCase{name: "forbidden", script: fakemodel.RunCommandThenSay("rm README.md", "not allowed"), policy: &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"rm *"}}}},
		captureCase{name: "reconnect", script: fakemodel.Say("made it"), drops: 2},
		captureCase{name: "interrupted", script: fakemodel.RunCommandThenSay("sleep 30", "done"), kill: `"type":"item.started"`},
		captureCase{name: "resume", script: fakemodel.Script{Turns: []fakemodel.Turn{{Text: "first"}, {Text: "second"}}}, resume: "first"},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := fakemodel.New(t, c.script)
			base := srv.OpenAIURL()
			if c.drops > 0 {
				base = dropProxy(t, srv.URL, c.drops) + "/v1"
			}
			ctx, h := harnesstest.CaptureSandbox(t)
			secrets, _ := sandbox.NewSecrets(map[string]string{"OPENAI_API_KEY": canaryKey})
			sessions := t.TempDir()
			req := harness.Request{Run: harness.Run{RunID: "capture"}, Prompt: "do it", Model: fakemodel.ModelID, Secrets: secrets, Policy: c.policy,
				RunDir:  filepath.Join(t.TempDir(), "run.d"),
				Options: map[string]string{codex.OptExecutable: bin, codex.OptBaseURL: base, codex.OptSessionsDir: sessions}}
			if c.resume != "" {
				out := harnesstest.Capture(t, ctx, codex.Harness{}, h, req, "", 0)
				req.Session = threadID(t, out)
				req.Prompt = "again"
			}
			out := harnesstest.Capture(t, ctx, codex.Harness{}, h, req, c.kill, 300*time.Millisecond)
			harnesstest.WriteFixture(t, h, "real-"+c.name+".jsonl", out)
		})
	}
}

func threadID(t *testing.T, out []byte) string {
	t.Helper()
	for _, l := range bytes.Split(out, []byte("\n")) {
		var v struct {
			Type     string `json:"type"`
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal(l, &v) == nil && v.Type == "thread.started" {
			return v.ThreadID
		}
	}
	t.Fatal("no thread.started")
	return ""
}

// dropProxy forwards to target, except that the first n Responses requests
// get a stream that ends before response.completed (a dropped connection,
// which codex retries with "Reconnecting... n/N").
func dropProxy(t *testing.T, target string, n int32) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	var seen atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/responses" && seen.Add(1) <= n {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_dropped\"}}\n\n")
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
