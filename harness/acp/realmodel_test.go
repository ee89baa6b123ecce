package acp_test

import (
	"encoding/json"
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

// TestRealOpenCodeACPModel: the model of a run (StartRequest.Model)
// reaches a real ACP agent, `opencode acp`, configured with two models and
// the first as its default: the run asking for the second makes the agent
// call the model endpoint with it; a model the agent does not offer fails
// the run before the prompt, naming those it offers.
func TestRealOpenCodeACPModel(t *testing.T) {
	bin := testutil.AgentBin(t, "opencode")
	srv := fakemodel.New(t, fakemodel.Script{Turns: []fakemodel.Turn{{Text: "hello from the other model"}}})
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	def := &sandbox.Definition{ID: "d", Provider: p, Policy: &sandbox.Policy{Default: sandbox.Allow}}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	h := acp.New(acp.Options{StartTimeout: time.Minute, ExitGrace: 2 * time.Second})
	t.Cleanup(func() { _ = h.Close(testCtx(t)) })
	r, err := run.New(st, []*sandbox.Definition{def}, []harness.Harness{h}, run.Options{JournalDir: t.TempDir(), PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(testCtx(t)) })
	const other = "other-model"
	cfg := filepath.Join(t.TempDir(), "opencode.json")
	conf := map[string]any{"autoupdate": false, "share": "disabled", "model": "corral/" + fakemodel.ModelID,
		"provider": map[string]any{"corral": map[string]any{"npm": "@ai-sdk/openai-compatible", "name": "corral",
			"options": map[string]any{"baseURL": srv.OpenAIURL(), "apiKey": "{env:OPENAI_API_KEY}"},
			"models":  map[string]any{fakemodel.ModelID: map[string]any{"name": fakemodel.ModelID}, other: map[string]any{"name": other}}}}}
	b, _ := json.Marshal(conf)
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OPENCODE_CONFIG": cfg, "OPENAI_API_KEY": "sk-fake", "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1"}
	d := t.TempDir()
	for _, k := range []string{"XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"} {
		env[k] = filepath.Join(d, k)
	}
	ctx := testCtx(t)
	runOnce := func(thread, model string) []event.Event {
		t.Helper()
		rec, err := r.Start(ctx, run.StartRequest{Definition: "d", Thread: thread, Harness: acp.Name, Prompt: "say hello",
			Model: model, Args: []string{bin, "acp"}, Env: env})
		if err != nil {
			t.Fatal(err)
		}
		var evs []event.Event
		if err := r.Follow(ctx, rec.ID, 0, func(e store.Event) error {
			ev, err := event.Unmarshal(e.Data)
			evs = append(evs, ev)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(ctx, rec.ID); err != nil {
			t.Fatal(err)
		}
		return evs
	}
	evs := runOnce("t-other", "corral/"+other)
	var asked []string
	for _, req := range srv.ModelRequests() {
		var body struct {
			Model string `json:"model"`
		}
		if json.Unmarshal(req.Body, &body) == nil {
			asked = append(asked, body.Model)
		}
	}
	if last(evs).Type != event.RunFinished || len(asked) == 0 || asked[len(asked)-1] != other {
		t.Fatalf("a run asking for corral/%s: last event %s, the model endpoint was asked for %q; events %s", other, last(evs).Type, asked, dump(evs))
	}
	bad := runOnce("t-bad", "corral/no-such-model")
	e := last(bad)
	if e.Type != event.RunError || e.Code != "acp-model" || !strings.Contains(e.Message, "corral/"+other) {
		t.Errorf("a model opencode does not offer: %s", dump(bad))
	}
	t.Logf("opencode acp with model corral/%s: the model endpoint was asked for %q; an unknown model: %s %q", other, asked, e.Code, e.Message)
}
