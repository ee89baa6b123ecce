package main

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/client"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/store"
)

// toolsScript is an agent, scripted, handed no token: it finds the
// corral-tools entry in the MCP configuration the command harness wrote,
// and saves a checkpoint with the header that entry references.
const toolsScript = `set -e
echo hi > f.txt
cfg=$(cat "$CORRAL_MCP_CONFIG")
url=$(printf '%s' "$cfg" | sed -n 's/.*"corral-tools":{.*"url":"\([^"]*\)".*/\1/p')
var=$(printf '%s' "$cfg" | sed -n 's/.*"Authorization":"\${\([A-Z0-9_]*\)}".*/\1/p')
eval "auth=\${$var}"
body='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"save_checkpoint","arguments":{"label":"from-the-agent"}}}'
if command -v curl >/dev/null; then
  curl -sS -X POST -H 'Content-Type: application/json' -H "Authorization: $auth" --data "$body" "$url"
else
  wget -q -O - --header 'Content-Type: application/json' --header "Authorization: $auth" --post-data "$body" "$url"
fi
echo
`

// agentSaves starts toolsScript through the daemon and reports whether
// the checkpoint it asked for was saved.
func agentSaves(t *testing.T, s *served, c *client.Client) (api.Run, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rec, err := c.Start(ctx, api.StartRun{Harness: "command", Prompt: toolsScript})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := c.Events(ctx, rec.ID, 0, func(ev store.Event) error { text.Write(ev.Data); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text.String(), "corral-rt1.") {
		t.Errorf("the events hold a run token: %s", text.String())
	}
	cps, _, err := c.Checkpoints(ctx, rec.Thread)
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range cps {
		if cp.Label == "from-the-agent" {
			return rec, true
		}
	}
	t.Logf("no checkpoint; events: %s\n%s", text.String(), s.stderr())
	return rec, false
}

// TestServeAgentTools: corral serve hands each run's agent the checkpoint
// tools on its own (--agent-tools defaults on); --agent-tools=false hands
// nothing. Where the host has a docker0 bridge, the address Docker
// sandboxes reach serves the tools route alone, to run tokens alone.
func TestServeAgentTools(t *testing.T) {
	const tok = "serve-tools-token"
	for _, tc := range []struct {
		name  string
		flags []string
		want  bool
	}{{"default", nil, true}, {"off", []string{"--agent-tools=false"}, false}} {
		t.Run(tc.name, func(t *testing.T) {
			s := serveCLI(t, t.TempDir(), append([]string{"--token", tok + "=acme"}, tc.flags...)...)
			c, err := client.New(s.url, tok)
			if err != nil {
				t.Fatal(err)
			}
			rec, saved := agentSaves(t, s, c)
			if saved != tc.want {
				t.Fatalf("checkpoint from the agent saved = %v, want %v", saved, tc.want)
			}
			if !tc.want {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			ip := dockerBridgeIP()
			if ip == "" {
				t.Log("no docker0 bridge: the Docker sandboxes' address is not tried")
				return
			}
			_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.url, "http://"))
			bridge := "http://" + net.JoinHostPort(ip, port)
			for _, path := range []string{"/v1/runs/" + rec.ID + "/mcp", "/v1/runs"} {
				req, _ := http.NewRequestWithContext(ctx, "POST", bridge+path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("the docker0 address %s: %v", bridge, err)
				}
				resp.Body.Close()
				if resp.StatusCode < 400 {
					t.Errorf("the docker0 address, tenant token, POST %s: %d, want refused", path, resp.StatusCode)
				}
			}
			t.Logf("run %s saved a checkpoint through its projected tools; the docker0 address %s refused the tenant token", rec.ID, bridge)
		})
	}
}

// TestServeAgentToolsDocker: an agent in a Docker sandbox reaches its
// tools on the host's docker0 address (the tools-only listener) with the
// token the daemon projected, and saves a checkpoint.
func TestServeAgentToolsDocker(t *testing.T) {
	testutil.NeedDocker(t)
	if dockerBridgeIP() == "" {
		t.Skip("no docker0 bridge on this host: Docker sandboxes get no tools here")
	}
	const tok = "serve-tools-docker"
	cfg := filepath.Join(t.TempDir(), "corral.yaml")
	if err := os.WriteFile(cfg, []byte("provider:\n  name: docker\n  docker: {image: "+testutil.DockerTestImage+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := serveCLIEnv(t, t.TempDir(), nil, "--config", cfg, "--token", tok+"=acme")
	c, err := client.New(s.url, tok)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sbs, _ := c.Sandboxes(ctx)
		for _, sb := range sbs {
			_ = c.DeleteSandbox(ctx, sb.Key)
		}
	})
	rec, saved := agentSaves(t, s, c)
	if !saved {
		t.Fatalf("run %s in Docker saved no checkpoint through its projected tools", rec.ID)
	}
	t.Logf("run %s in a Docker sandbox saved a checkpoint through the docker0 tools address", rec.ID)
}
