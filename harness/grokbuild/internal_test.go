package grokbuild

import (
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"github.com/d10ffeed/corral/sandbox"
)

func TestPolicyFlags(t *testing.T) {
	cases := []struct {
		name    string
		policy  *sandbox.Policy
		scripts map[string]string
		want    string
	}{
		{"NoPolicyAllowsEverything", nil, nil, "--always-approve"},
		{"AllowAll", &sandbox.Policy{Default: sandbox.Allow}, nil, "--always-approve"},
		{"AllowWithDenies", &sandbox.Policy{Default: sandbox.Allow, Commands: sandbox.CommandRules{Deny: []string{"sudo *"}, Ask: []string{"git push*"}}},
			nil, "--always-approve --deny Bash(sudo *) --deny Bash(git push*)"},
		{"ScriptAlias", &sandbox.Policy{Default: sandbox.Allow, Commands: sandbox.CommandRules{Deny: []string{"deploy"}}},
			map[string]string{"deploy": "make deploy"}, "--always-approve --deny Bash(deploy) --deny Bash(make deploy)"},
		{"Conservative", &sandbox.Policy{Default: sandbox.Deny, FileWrite: sandbox.Allow, Network: sandbox.Allow, Commands: sandbox.CommandRules{Allow: []string{"go test*"}}},
			nil, "--permission-mode default --allow Bash(go test*) --allow Edit --allow Write --allow WebFetch"},
		{"NoWritesNoNetwork", &sandbox.Policy{Default: sandbox.Allow, FileWrite: sandbox.Deny, Network: sandbox.Ask},
			nil, "--always-approve --deny Edit --deny Write --disable-web-search --deny WebFetch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := strings.Join(policyFlags(c.policy, c.scripts), " "); got != c.want {
				t.Errorf("flags = %q\nwant    %q", got, c.want)
			}
		})
	}
}

func TestMergeConfig(t *testing.T) {
	servers := []sandbox.MCPServer{
		{Name: "docs", Type: "http", URL: "https://docs.example/mcp", Headers: map[string]string{"Authorization": "Bearer tok"}},
		{Name: "fs", Type: "stdio", Command: "npx", Args: []string{"-y", "fs-mcp"}, Env: map[string]string{"ROOT": "/w"}},
	}
	cases := []struct {
		name     string
		existing string
		check    func(t *testing.T, doc map[string]any)
		errCode  sandbox.Code
	}{
		{name: "NoFile", check: func(t *testing.T, doc map[string]any) {
			ms := doc["mcp_servers"].(map[string]any)
			docs := ms["docs"].(map[string]any)
			if docs["url"] != "https://docs.example/mcp" || docs["enabled"] != true || docs["headers"].(map[string]any)["Authorization"] != "Bearer tok" {
				t.Errorf("docs = %v", docs)
			}
			fs := ms["fs"].(map[string]any)
			if fs["command"] != "npx" || len(fs["args"].([]any)) != 2 || fs["env"].(map[string]any)["ROOT"] != "/w" {
				t.Errorf("fs = %v", fs)
			}
		}},
		{name: "KeepsEverythingElse", existing: `# my settings
model = "grok-build"
[cli]
auto_update = false
[mcp_servers.mine]
command = "my-mcp"
startup_timeout_sec = 45
[mcp_servers.docs]
url = "http://old"
tool_timeouts = { search = 30 }
`, check: func(t *testing.T, doc map[string]any) {
			if doc["model"] != "grok-build" || doc["cli"].(map[string]any)["auto_update"] != false {
				t.Errorf("top-level keys lost: %v", doc)
			}
			ms := doc["mcp_servers"].(map[string]any)
			if mine := ms["mine"].(map[string]any); mine["command"] != "my-mcp" || mine["startup_timeout_sec"] != int64(45) {
				t.Errorf("the user's server changed: %v", mine)
			}
			docs := ms["docs"].(map[string]any)
			if docs["url"] != "https://docs.example/mcp" || docs["tool_timeouts"] == nil {
				t.Errorf("a server with our name keeps its other keys: %v", docs)
			}
		}},
		{name: "NotTOML", existing: "this is [ not toml", errCode: sandbox.FailedPrecondition},
		{name: "ServersNotATable", existing: `mcp_servers = "x"`, errCode: sandbox.FailedPrecondition},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := mergeConfig([]byte(c.existing), servers)
			if c.errCode != sandbox.OK {
				if sandbox.CodeOf(err) != c.errCode {
					t.Fatalf("err = %v, want %s", err, c.errCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			doc := map[string]any{}
			if err := toml.Unmarshal(out, &doc); err != nil {
				t.Fatalf("the result is not TOML: %v\n%s", err, out)
			}
			c.check(t, doc)
		})
	}
}

func TestNormalizeStop(t *testing.T) {
	for in, want := range map[string]string{"EndTurn": "end_turn", "end_turn": "end_turn", "Cancelled": "cancelled", "MaxTurnRequests": "max_turn_requests", "": ""} {
		if got := normalizeStop(in); got != want {
			t.Errorf("normalizeStop(%q) = %q, want %q", in, got, want)
		}
	}
}
