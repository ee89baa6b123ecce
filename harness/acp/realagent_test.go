package acp_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/acp"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

// TestRealOpenCodeACP runs a real ACP agent, `opencode acp`, against the
// scripted model, which has it run `rm README.md` under a policy that
// denies `rm *`. OpenCode runs its shell itself, without asking corral, so
// corral cannot stop it: the run must say so at its start (the notice and
// the record), and once it has ended none of the agent's processes may be
// left.
func TestRealOpenCodeACP(t *testing.T) {
	bin := testutil.AgentBin(t, "opencode")
	srv := fakemodel.New(t, fakemodel.RunCommandThenSay("rm README.md", "removed it"))
	base := t.TempDir()
	p, err := local.New(local.Options{BaseDir: base})
	if err != nil {
		t.Fatal(err)
	}
	policy := &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"rm *"}}, Default: sandbox.Allow}
	def := &sandbox.Definition{ID: "d", Provider: p, Policy: policy,
		Workspace: &sandbox.Workspace{Skills: []sandbox.Skill{{Path: "README.md", Content: "hello\n"}}}}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	h := acp.New(acp.Options{StartTimeout: time.Minute, ExitGrace: 2 * time.Second})
	t.Cleanup(func() { _ = h.Close(testCtx(t)) })
	r, err := run.New(st, []*sandbox.Definition{def}, []harness.Harness{h}, run.Options{JournalDir: t.TempDir(), PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(testCtx(t)) })

	cfg := filepath.Join(t.TempDir(), "opencode.json")
	model := "corral/" + fakemodel.ModelID
	conf := map[string]any{"autoupdate": false, "share": "disabled", "model": model,
		"provider": map[string]any{"corral": map[string]any{"npm": "@ai-sdk/openai-compatible", "name": "corral",
			"options": map[string]any{"baseURL": srv.OpenAIURL(), "apiKey": "{env:OPENAI_API_KEY}"},
			"models":  map[string]any{fakemodel.ModelID: map[string]any{"name": fakemodel.ModelID}}}}}
	b, _ := json.Marshal(conf)
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	mark := fmt.Sprintf("opencode-%d-%d", os.Getpid(), time.Now().UnixNano())
	killMarked(t, mark)
	env := map[string]string{"OPENCODE_CONFIG": cfg, "OPENAI_API_KEY": "sk-fake", "OPENCODE_DISABLE_AUTOUPDATE": "1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD": "1", markEnv: mark}
	d := t.TempDir()
	for _, k := range []string{"XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"} {
		env[k] = filepath.Join(d, k)
	}
	ctx := testCtx(t)
	rec, err := r.Start(ctx, run.StartRequest{Definition: "d", Thread: "th", Harness: acp.Name, Prompt: "remove the readme",
		Args: []string{bin, "acp"}, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	var evs []event.Event
	peak := 0
	if err := r.Follow(ctx, rec.ID, 0, func(e store.Event) error {
		ev, err := event.Unmarshal(e.Data)
		if err != nil {
			return err
		}
		evs = append(evs, ev)
		peak = max(peak, len(marked(t, mark)))
		t.Logf("event: %.300s", e.Data)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if err := r.Wait(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	if len(evs) < 2 || evs[1].Name != event.PolicyUnenforced || !strings.Contains(string(evs[1].Value), `"pattern":"rm *"`) {
		t.Errorf("the run must open by saying corral cannot enforce rm * on the agent's own shell: %s", dump(evs))
	}
	final, _, _ := r.Store().GetRun(ctx, rec.ID)
	if !strings.Contains(final.PolicyUnenforced, "rm *") {
		t.Errorf("the record must say so too: %q", final.PolicyUnenforced)
	}
	left := marked(t, mark)
	if len(left) != 0 {
		t.Errorf("processes left after the run: %d%s", len(left), describe(left))
	}
	removed := "kept"
	sandboxes, _ := filepath.Glob(filepath.Join(base, "*", "README.md"))
	if len(sandboxes) == 0 {
		removed = "removed"
	}
	t.Logf("opencode acp: run %s (%s), %d model requests, peak %d processes, %d left after the run; README.md %s under deny rm *",
		final.Status, last(evs).Type, len(srv.ModelRequests()), peak, len(left), removed)
}
