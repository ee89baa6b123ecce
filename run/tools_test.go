package run_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// fakeTools reaches sandboxes of the providers in reach.
type fakeTools struct{ reach map[string]bool }

func (f fakeTools) Endpoint(provider string, rec store.Run) (string, bool) {
	return "http://tools.test/v1/runs/" + rec.ID + "/mcp", f.reach[provider]
}

func (fakeTools) Token(rec store.Run) string { return "tok-" + rec.ID + "-" + rec.JournalNonce }

// seen is what a recording harness was handed for one run.
type seen struct {
	servers []sandbox.MCPServer
	token   string
}

type toolsRecorder struct {
	recording
	mu  sync.Mutex
	got []seen
}

// Warm makes the recorder a harness.Warmer: option warm=true asks for a
// warm session.
func (h *toolsRecorder) Warm(options map[string]string) bool { return options["warm"] == "true" }

func (h *toolsRecorder) Prepare(ctx context.Context, sb sandbox.Handle, req harness.Request) (harness.Invocation, error) {
	tok, _ := req.Secrets.Value(run.AgentToolsTokenSecret)
	h.mu.Lock()
	h.got = append(h.got, seen{slices.Clone(req.MCPServers), tok})
	h.mu.Unlock()
	return h.recording.Harness.Prepare(ctx, sb, req)
}

// TestAgentToolsProjection: with Options.Tools the runner adds the
// corral-tools entry (its header a secret reference, the run's token in
// the secrets the harness reads); a provider the tools cannot reach, or a
// server of the user's that already has the name, or a warm session (its
// agent outlives the run's token), gets nothing added.
func TestAgentToolsProjection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reach bool
		own   []sandbox.MCPServer
		want  []string
		warm  bool
	}{
		{"projected", true, nil, []string{run.AgentToolsServer}, false},
		{"unreachable provider", false, nil, nil, false},
		{"the user's own corral-tools", true, []sandbox.MCPServer{{Name: run.AgentToolsServer, URL: "https://mine.example/mcp"}}, []string{run.AgentToolsServer}, false},
		{"a warm session", true, nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			h := &toolsRecorder{}
			r, err := run.New(e.st, []*sandbox.Definition{e.def}, []harness.Harness{h}, run.Options{LeaseTTL: 2 * time.Second, PollInterval: 50 * time.Millisecond,
				Tools: fakeTools{reach: map[string]bool{e.def.Provider.Name(): tc.reach}}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Close(context.Background()) })
			c := ctx(t)
			var opts map[string]string
			if tc.warm {
				opts = map[string]string{"warm": "true"}
			}
			rec, err := r.Start(c, run.StartRequest{Definition: "d", Harness: "recording", Args: []string{"true"}, MCPServers: tc.own, Options: opts})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Wait(c, rec.ID); err != nil {
				t.Fatal(err)
			}
			h.mu.Lock()
			got := h.got[0]
			h.mu.Unlock()
			var names []string
			for _, s := range got.servers {
				names = append(names, s.Name)
			}
			if !slices.Equal(names, tc.want) {
				t.Fatalf("MCP servers %v, want %v", names, tc.want)
			}
			projected := tc.reach && tc.own == nil && !tc.warm
			if projected {
				s := got.servers[0]
				if s.URL != "http://tools.test/v1/runs/"+rec.ID+"/mcp" || s.Headers["Authorization"] != "Bearer ${secret:"+run.AgentToolsTokenSecret+"}" {
					t.Errorf("the entry: %+v", s)
				}
				if got.token != (fakeTools{}).Token(rec) {
					t.Errorf("the token the harness reads: %q, want the run's", got.token)
				}
			} else if got.token != "" || (tc.own != nil && got.servers[0].URL != tc.own[0].URL) {
				t.Errorf("nothing should have been added: %+v", got)
			}
			t.Logf("%s: servers %v, token handed over: %v", tc.name, names, got.token != "")
		})
	}
}
