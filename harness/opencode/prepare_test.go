package opencode

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/sandbox"
)

const testKey = "sk-test-key-91fe"

func newHandle(t *testing.T) (sandbox.Handle, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return testutil.LocalSandbox(t), ctx
}

func baseRequest(t *testing.T) harness.Request {
	t.Helper()
	secrets, err := sandbox.NewSecrets(map[string]string{"OPENAI_API_KEY": testKey, "OTHER_KEY": "other"})
	if err != nil {
		t.Fatal(err)
	}
	return harness.Request{
		Run:           harness.Run{RunID: "run-1", ThreadID: "thread-1"},
		Prompt:        "fix the bug",
		Model:         "fake-model",
		Secrets:       secrets,
		RunDir:        filepath.Join(t.TempDir(), "run.d"),
		WorkspaceRoot: "/srv/ws",
		Options:       map[string]string{OptBaseURL: "http://127.0.0.1:9/v1"},
	}
}

func TestPrepareAPIKey(t *testing.T) {
	h, ctx := newHandle(t)
	req := baseRequest(t)
	req.Session = "ses_dd96551a5ffeLr5hHVZnjRp2c0"
	req.Args = []string{"--agent", "build"}
	req.Env = map[string]string{"FOO": "bar"}
	req.Options[OptExecutable] = "/opt/opencode"
	inv, err := Harness{}.Prepare(ctx, h, req)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/opencode", "run", "--format", "json", "--thinking", "-m", "corral/fake-model", "-s", req.Session, "--agent", "build"}
	if !slices.Equal(inv.Command.Args, want) {
		t.Errorf("argv\n got %q\nwant %q", inv.Command.Args, want)
	}
	if string(inv.Stdin) != req.Prompt || strings.Contains(strings.Join(inv.Command.Args, " "), req.Prompt) {
		t.Error("the prompt is not on stdin only")
	}
	env := inv.Command.Env
	cfgPath := filepath.Join(req.RunDir, "opencode.json")
	if env["OPENCODE_CONFIG"] != cfgPath || env["OPENAI_API_KEY"] != testKey || env["FOO"] != "bar" || env["PWD"] != "/srv/ws" {
		t.Errorf("env OPENCODE_CONFIG=%q PWD=%q FOO=%q key set %v", env["OPENCODE_CONFIG"], env["PWD"], env["FOO"], env["OPENAI_API_KEY"] == testKey)
	}
	if _, ok := env["OTHER_KEY"]; ok {
		t.Error("an unrelated secret was added to the environment")
	}
	if got, want := env["OPENCODE_CONFIG_CONTENT"], `{"permission":{"bash":"allow","edit":"allow","webfetch":"allow","websearch":"allow"}}`; got != want {
		t.Errorf("no policy allows everything:\n got %s\nwant %s", got, want)
	}
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), testKey) {
		t.Fatal("the key is in opencode.json")
	}
	var cfg struct {
		Provider map[string]struct {
			NPM     string `json:"npm"`
			Options struct {
				BaseURL string `json:"baseURL"`
				APIKey  string `json:"apiKey"`
			} `json:"options"`
			Models map[string]any `json:"models"`
		} `json:"provider"`
		Share string `json:"share"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	p := cfg.Provider["corral"]
	if p.NPM != "@ai-sdk/openai-compatible" || p.Options.BaseURL != "http://127.0.0.1:9/v1" || p.Options.APIKey != "{env:OPENAI_API_KEY}" || p.Models["fake-model"] == nil || cfg.Share != "disabled" {
		t.Errorf("opencode.json:\n%s", raw)
	}
	if fi, err := os.Stat(cfgPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("opencode.json mode %v %v", fi.Mode(), err)
	}
}

func TestPrepareErrors(t *testing.T) {
	h, ctx := newHandle(t)
	for _, c := range []struct {
		name string
		edit func(*harness.Request)
		code sandbox.Code
	}{
		{"no prompt", func(r *harness.Request) { r.Prompt = "" }, sandbox.InvalidArgument},
		{"bad auth", func(r *harness.Request) { r.Auth = "token" }, sandbox.InvalidArgument},
		{"no run dir", func(r *harness.Request) { r.RunDir = "rel" }, sandbox.InvalidArgument},
		{"base URL without a model", func(r *harness.Request) { r.Model = "" }, sandbox.InvalidArgument},
		{"missing secret", func(r *harness.Request) { r.Options[OptAPIKeySecret] = "NOPE_KEY" }, sandbox.FailedPrecondition},
		{"bad secret name", func(r *harness.Request) { r.Options[OptAPIKeySecret] = "A=B" }, sandbox.InvalidArgument},
		{"host auth with base URL", func(r *harness.Request) { r.Auth = harness.AuthHost }, sandbox.InvalidArgument},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := baseRequest(t)
			c.edit(&req)
			_, err := Harness{}.Prepare(ctx, h, req)
			if got := sandbox.CodeOf(err); got != c.code {
				t.Fatalf("code %v (%v), want %v", got, err, c.code)
			}
		})
	}
}

func TestPrepareHostAuth(t *testing.T) {
	h, ctx := newHandle(t)
	req := baseRequest(t)
	req.Auth = harness.AuthHost
	req.Model = "anthropic/claude-x"
	req.Session = "../bad id"
	delete(req.Options, OptBaseURL)
	req.Env = map[string]string{"ANTHROPIC_API_KEY": "from-env"}
	inv, err := Harness{}.Prepare(ctx, h, req)
	if err != nil {
		t.Fatal(err)
	}
	args := inv.Command.Args
	if args[0] != "env" || !slices.Contains(args, "ANTHROPIC_API_KEY") || !slices.Contains(args, "OPENAI_API_KEY") {
		t.Errorf("argv %q", args)
	}
	if i := slices.Index(args, "opencode"); i < 0 || !slices.Equal(args[i:], []string{"opencode", "run", "--format", "json", "--thinking", "-m", "anthropic/claude-x"}) {
		t.Errorf("argv %q", args)
	}
	for _, k := range ProviderKeyEnv {
		if _, ok := inv.Command.Env[k]; ok {
			t.Errorf("host auth keeps %s", k)
		}
	}
}

func TestPermissionConfig(t *testing.T) {
	for _, c := range []struct {
		name      string
		p         sandbox.Policy
		scripts   map[string]string
		approvals map[string]bool
		want      string
	}{
		{"empty policy asks", sandbox.Policy{},
			nil, nil,
			`{"permission":{"bash":"ask","edit":"ask","webfetch":"ask","websearch":"ask"}}`},
		{"order is precedence", sandbox.Policy{Default: sandbox.Allow, FileWrite: sandbox.Deny,
			Commands: sandbox.CommandRules{Allow: []string{"git *"}, Ask: []string{"git push *"}, Deny: []string{"git push --force*", "git *"}}},
			nil, nil,
			`{"permission":{"bash":{"*":"allow","git push *":"ask","git push --force*":"deny","git *":"deny"},"edit":"deny","webfetch":"allow","websearch":"allow"}}`},
		{"script aliases", sandbox.Policy{Default: sandbox.Deny, Commands: sandbox.CommandRules{Allow: []string{"test"}}},
			map[string]string{"test": "go test ./..."}, nil,
			`{"permission":{"bash":{"*":"deny","test":"allow","go test ./...":"allow"},"edit":"deny","webfetch":"deny","websearch":"deny"}}`},
		{"approvals", sandbox.Policy{Default: sandbox.Ask, Commands: sandbox.CommandRules{Deny: []string{"rm *"}}},
			nil, map[string]bool{
				"opencode:command:cd src && make":          true,
				"opencode:command:curl x":                  false,
				"opencode:command:ls *.go":                 true, // a wildcard would approve more: skipped
				"opencode:fileWrite:/srv/ws/notes.txt":     true,
				"opencode:fileWrite:/elsewhere/x":          true, // outside the workspace: skipped
				"opencode:network:https://example.com/doc": true,
				"opencode:tool:task":                       true,
				"opencode:tool:apply_patch":                true,
				"claude:command:ls":                        true, // another harness's id
			},
			`{"permission":{"bash":{"*":"ask","cd src && make":"allow","cd src":"allow","make":"allow","curl x":"deny","rm *":"deny"},"edit":{"notes.txt":"allow","*":"allow"},"webfetch":{"*":"ask","https://example.com/doc":"allow"},"websearch":{"*":"ask","https://example.com/doc":"allow"},"task":"allow"}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := permissionConfig(&c.p, c.scripts, c.approvals, "/srv/ws")
			if got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
			if !json.Valid([]byte(got)) {
				t.Error("not JSON")
			}
		})
	}
}

func TestPrepareProjection(t *testing.T) {
	h, ctx := newHandle(t)
	const token, quoted = "tok-5f1e0c", `pa"ss\word`
	for _, f := range []string{"skills/probe/SKILL.md", "pack/a/SKILL.md", "pack/node_modules/x/SKILL.md"} {
		if err := h.FS().WriteFile(ctx, f, []byte("---\nname: x\ndescription: y\n---\n")); err != nil {
			t.Fatal(err)
		}
	}
	root := h.WorkspaceRoot()
	type server struct {
		Type        string            `json:"type"`
		URL         string            `json:"url"`
		Command     []string          `json:"command"`
		Headers     map[string]string `json:"headers"`
		Environment map[string]string `json:"environment"`
		Enabled     bool              `json:"enabled"`
	}
	for _, c := range []struct {
		name    string
		roots   []string
		servers []sandbox.MCPServer
		skills  []string          // want skills.paths
		mcp     map[string]server // want mcp
		env     map[string]string // want in the environment
	}{
		{name: "nothing"},
		{name: "skills", roots: []string{"skills/probe", "pack", "missing"},
			skills: []string{root + "/pack/a", root + "/skills/probe"}},
		{name: "local server",
			servers: []sandbox.MCPServer{{Name: "probe", Command: "node", Args: []string{"stub.js", "probe"},
				Env: map[string]string{"TOKEN": "${secret:PROBE_TOKEN}", "PLAIN": "x"}}},
			mcp: map[string]server{"probe": {Type: "local", Command: []string{"node", "stub.js", "probe"}, Enabled: true,
				Environment: map[string]string{"PLAIN": "x", "TOKEN": "{env:CORRAL_MCP_VALUE_0}"}}},
			env: map[string]string{"CORRAL_MCP_VALUE_0": token}},
		{name: "remote servers",
			servers: []sandbox.MCPServer{
				{Name: "web", URL: "https://mcp.example/mcp", Headers: map[string]string{"Authorization": "Bearer ${secret:PROBE_TOKEN}", "X-Plain": "p"}},
				{Name: "old", Type: "sse", URL: "https://mcp.example/sse", Headers: map[string]string{"X-Key": "${secret:QUOTED}"}},
			},
			mcp: map[string]server{
				"web": {Type: "remote", URL: "https://mcp.example/mcp", Enabled: true,
					Headers: map[string]string{"Authorization": "{env:CORRAL_MCP_VALUE_0}", "X-Plain": "p"}},
				"old": {Type: "remote", URL: "https://mcp.example/sse", Enabled: true,
					Headers: map[string]string{"X-Key": "{env:CORRAL_MCP_VALUE_1}"}},
			},
			// JSON-escaped: opencode pastes the value into its JSON text.
			env: map[string]string{"CORRAL_MCP_VALUE_0": "Bearer " + token, "CORRAL_MCP_VALUE_1": `pa\"ss\\word`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := baseRequest(t)
			secrets, err := sandbox.NewSecrets(map[string]string{"OPENAI_API_KEY": testKey, "PROBE_TOKEN": token, "QUOTED": quoted})
			if err != nil {
				t.Fatal(err)
			}
			req.Secrets, req.WorkspaceRoot, req.SkillRoots, req.MCPServers = secrets, root, c.roots, c.servers
			inv, err := Harness{}.Prepare(ctx, h, req)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(filepath.Join(req.RunDir, "opencode.json"))
			if err != nil {
				t.Fatal(err)
			}
			argv := strings.Join(inv.Command.Args, " ")
			for _, s := range []string{token, quoted, "pa\\\"ss"} {
				if strings.Contains(string(raw), s) || strings.Contains(argv, s) {
					t.Errorf("secret %q in opencode.json or argv:\n%s\n%s", s, raw, argv)
				}
			}
			var cfg struct {
				Skills *struct {
					Paths []string `json:"paths"`
				} `json:"skills"`
				MCP map[string]server `json:"mcp"`
			}
			if err := json.Unmarshal(raw, &cfg); err != nil {
				t.Fatal(err)
			}
			var paths []string
			if cfg.Skills != nil {
				paths = cfg.Skills.Paths
			}
			if !slices.Equal(paths, c.skills) {
				t.Errorf("skills.paths %q, want %q", paths, c.skills)
			}
			gotMCP, _ := json.Marshal(cfg.MCP)
			wantMCP, _ := json.Marshal(c.mcp)
			if len(c.mcp) == 0 {
				wantMCP = []byte("null")
			}
			if string(gotMCP) != string(wantMCP) {
				t.Errorf("mcp\n got %s\nwant %s", gotMCP, wantMCP)
			}
			for k, v := range c.env {
				if inv.Command.Env[k] != v {
					t.Errorf("env %s = %q, want %q", k, inv.Command.Env[k], v)
				}
			}
			for k := range inv.Command.Env {
				if strings.HasPrefix(k, harness.MCPValuePrefix) && c.env[k] == "" {
					t.Errorf("unexpected %s in the environment", k)
				}
			}
			// The escaped variable, pasted into the JSON text the way
			// opencode does, yields the secret itself.
			if v, ok := inv.Command.Env["CORRAL_MCP_VALUE_1"]; ok {
				var back string
				if err := json.Unmarshal([]byte(`"`+v+`"`), &back); err != nil || back != quoted {
					t.Errorf("CORRAL_MCP_VALUE_1 pasted into JSON reads %q (%v), want %q", back, err, quoted)
				}
			}
		})
	}
	// Nothing was written into the workspace but the skills.
	var got []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			got = append(got, strings.TrimPrefix(p, root+"/"))
		}
		return nil
	})
	slices.Sort(got)
	if want := []string{"pack/a/SKILL.md", "pack/node_modules/x/SKILL.md", "skills/probe/SKILL.md"}; !slices.Equal(got, want) {
		t.Errorf("workspace files %q, want %q", got, want)
	}
}

func TestPrepareMCPErrors(t *testing.T) {
	h, ctx := newHandle(t)
	const token = "tok-never-in-errors"
	for _, c := range []struct {
		name   string
		server sandbox.MCPServer
	}{
		{"bad name", sandbox.MCPServer{Name: "a b", Command: "x", Env: map[string]string{"T": "${secret:PROBE_TOKEN}"}}},
		{"unknown secret", sandbox.MCPServer{Name: "a", URL: "https://x", Headers: map[string]string{"H": "${secret:NOPE}"}}},
		{"secret in args", sandbox.MCPServer{Name: "a", Command: "x", Args: []string{"${secret:PROBE_TOKEN}"}}},
		{"url and command", sandbox.MCPServer{Name: "a", Command: "x", URL: "https://x"}},
		{"stdio with a url", sandbox.MCPServer{Name: "a", Type: "stdio", URL: "https://x"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := baseRequest(t)
			secrets, err := sandbox.NewSecrets(map[string]string{"OPENAI_API_KEY": testKey, "PROBE_TOKEN": token})
			if err != nil {
				t.Fatal(err)
			}
			req.Secrets, req.MCPServers = secrets, []sandbox.MCPServer{c.server}
			_, err = Harness{}.Prepare(ctx, h, req)
			if got := sandbox.CodeOf(err); got != sandbox.InvalidArgument {
				t.Fatalf("code %v (%v), want InvalidArgument", got, err)
			}
			if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), testKey) {
				t.Errorf("the error carries a secret: %v", err)
			}
			if _, err := os.Stat(filepath.Join(req.RunDir, "opencode.json")); err == nil {
				t.Error("opencode.json written for an invalid request")
			}
		})
	}
}
