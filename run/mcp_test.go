package run_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
)

// recording is the command harness, noting the MCP servers it is given.
type recording struct {
	command.Harness
	mu  sync.Mutex
	got [][]sandbox.MCPServer
}

func (h *recording) Name() string { return "recording" }

func (h *recording) Prepare(ctx context.Context, sb sandbox.Handle, req harness.Request) (harness.Invocation, error) {
	h.mu.Lock()
	h.got = append(h.got, slices.Clone(req.MCPServers))
	h.mu.Unlock()
	return h.Harness.Prepare(ctx, sb, req)
}

// TestRunMCPServers: a run's own MCP servers reach its harness besides the
// workspace's, for that run only; a server that breaks the workspace rules
// is refused at Start.
func TestRunMCPServers(t *testing.T) {
	e := newEnv(t)
	secrets, err := sandbox.NewSecrets(map[string]string{"TOKEN": "t0k"})
	if err != nil {
		t.Fatal(err)
	}
	e.def.Workspace = &sandbox.Workspace{Secrets: secrets,
		MCPServers: []sandbox.MCPServer{{Name: "docs", URL: "https://mcp.example/docs"}}}
	h := &recording{}
	r, err := run.New(e.st, []*sandbox.Definition{e.def}, []harness.Harness{h}, run.Options{LeaseTTL: 2 * time.Second, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	c := ctx(t)
	own := sandbox.MCPServer{Name: "tracker", Command: "tracker-mcp", Env: map[string]string{"TRACKER_TOKEN": "${secret:TOKEN}"}}
	for i, servers := range [][]sandbox.MCPServer{{own}, nil} {
		rec, err := r.Start(c, run.StartRequest{Definition: "d", Harness: "recording", Args: []string{"true"}, MCPServers: servers})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(c, rec.ID); err != nil {
			t.Fatal(err)
		}
		h.mu.Lock()
		got := h.got[i]
		h.mu.Unlock()
		var names []string
		for _, s := range got {
			names = append(names, s.Name)
		}
		want := []string{"docs"}
		if servers != nil {
			want = []string{"docs", "tracker"}
		}
		t.Logf("run %d: the harness got MCP servers %v", i+1, names)
		if !slices.Equal(names, want) {
			t.Errorf("run %d: MCP servers %v, want %v", i+1, names, want)
		}
	}
	for _, tc := range []struct {
		name string
		s    sandbox.MCPServer
	}{
		{"a name the workspace has", sandbox.MCPServer{Name: "docs", URL: "https://other.example"}},
		{"an unknown secret", sandbox.MCPServer{Name: "x", Command: "x", Env: map[string]string{"K": "${secret:NOPE}"}}},
		{"neither url nor command", sandbox.MCPServer{Name: "y"}},
		{"a bad name", sandbox.MCPServer{Name: "-bad", Command: "x"}},
	} {
		_, err := r.Start(c, run.StartRequest{Definition: "d", Harness: "recording", Args: []string{"true"}, MCPServers: []sandbox.MCPServer{tc.s}})
		if sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Errorf("%s: Start = %v, want InvalidArgument", tc.name, err)
		}
	}
}
