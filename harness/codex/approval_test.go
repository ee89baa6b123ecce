package codex_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/codex"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/mcpstub"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store/memstore"
)

// TestRealCodexApprovalAnswered: a policy that asks before the agent
// calls an MCP server's tools (what codex asks corral about). The
// thread's first run asks (approval.requested, the call refused); its
// next run carries the answer, as `corral run --thread T --approve ID` (or
// --deny) gives it, and the resumed session's retry of the call gets the
// tool's result, or is refused again without a second request.
func TestRealCodexApprovalAnswered(t *testing.T) {
	bin := testutil.AgentBin(t, "codex")
	if _, err := exec.LookPath("node"); err != nil {
		testutil.Unavailable(t, "node is not installed (the MCP stub needs it)")
	}
	const token = "probe-token-answered-77e0"
	call := fakemodel.Turn{Tool: &fakemodel.ToolCall{Name: mcpstub.ToolName("probe"), Namespace: "mcp__probe", Input: json.RawMessage(`{}`)}}
	srv := fakemodel.New(t, fakemodel.Script{Turns: []fakemodel.Turn{call, {Text: "it needs approval"}, call, {Text: "done"}}})
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := sandbox.NewSecrets(map[string]string{"OPENAI_API_KEY": canaryKey, "PROBE_TOKEN": token})
	if err != nil {
		t.Fatal(err)
	}
	def := &sandbox.Definition{ID: "d", Provider: p, Policy: &sandbox.Policy{Default: sandbox.Ask}, Workspace: &sandbox.Workspace{
		MCPServers: []sandbox.MCPServer{{Name: "probe", Command: "node", Args: []string{mcpstub.Write(t), "probe"},
			Env: map[string]string{mcpstub.TokenEnv: "${secret:PROBE_TOKEN}"}}},
		Secrets: secrets,
	}}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	r, err := run.New(st, []*sandbox.Definition{def}, []harness.Harness{codex.Harness{}}, run.Options{PollInterval: 50 * time.Millisecond, JournalDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id := sandbox.ApprovalID(codex.Name, sandbox.ApproveTool, "mcp__probe")
	probed := "probed " + mcpstub.Digest(token)
	for _, c := range []struct {
		name  string
		allow bool
	}{{"approve", true}, {"deny", false}} {
		t.Run(c.name, func(t *testing.T) {
			thread, sessions := "t-"+c.name, t.TempDir()
			start := func(approvals map[string]bool) (results, asked []string) {
				t.Helper()
				evs := runToEnd(t, ctx, r, run.StartRequest{Definition: "d", Thread: thread, Harness: codex.Name, Prompt: "call the probe", Model: fakemodel.ModelID,
					Options:   map[string]string{codex.OptExecutable: bin, codex.OptBaseURL: srv.OpenAIURL(), codex.OptSessionsDir: sessions, codex.OptPolicy: "best-effort"},
					Approvals: approvals})
				for _, e := range evs {
					switch {
					case e.Type == event.ToolCallResult:
						results = append(results, e.Content)
					case e.Type == event.Custom && e.Name == event.ApprovalRequested:
						var a event.Approval
						_ = json.Unmarshal(e.Value, &a)
						asked = append(asked, a.ID)
					}
				}
				return results, asked
			}
			results, asked := start(nil)
			if len(asked) != 1 || asked[0] != id || len(results) != 1 || strings.Contains(results[0], probed) {
				t.Fatalf("first run: asked %q, results %q; want one request for %s and a refused call", asked, results, id)
			}
			results2, asked2 := start(map[string]bool{id: c.allow})
			got := len(results2) == 1 && strings.Contains(results2[0], probed)
			if len(asked2) != 0 || len(results2) != 1 || got != c.allow {
				t.Errorf("answered run (%s): asked %q, results %q", c.name, asked2, results2)
			}
			t.Logf("codex --%s %s: first run asked %d, answered run asked %d, tool ran %v, results %q", c.name, id, len(asked), len(asked2), got, results2)
		})
	}
}
