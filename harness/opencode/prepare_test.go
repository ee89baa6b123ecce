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
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/sandbox"
)

const testKey = "sk-test-key-91fe"

func newHandle(t *testing.T) (sandbox.Handle, context.Context) {
	t.Helper()
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	h, err := p.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	return h, ctx
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
	if _, ok := env["OPENCODE_CONFIG_CONTENT"]; ok {
		t.Error("permissions without a policy")
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
		{"bad approvals", func(r *harness.Request) { r.Options[OptApprovals] = "[1]" }, sandbox.InvalidArgument},
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
