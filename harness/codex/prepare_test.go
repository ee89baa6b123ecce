package codex

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/sandbox"
)

const testKey = "sk-test-key-7d2a"

func newHandle(t *testing.T) (sandbox.Handle, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return testutil.LocalSandbox(t), ctx
}

func baseRequest(t *testing.T) harness.Request {
	t.Helper()
	secrets, err := sandbox.NewSecrets(map[string]string{"OPENAI_API_KEY": testKey})
	if err != nil {
		t.Fatal(err)
	}
	return harness.Request{
		Run:     harness.Run{RunID: "run-1", ThreadID: "thread-1"},
		Prompt:  "fix the bug, key hint: none",
		Secrets: secrets,
		RunDir:  filepath.Join(t.TempDir(), "run.d"),
		Options: map[string]string{OptSessionsDir: t.TempDir(), OptHome: "run"},
	}
}

// outsideTmp makes a directory under /var/tmp (removed at the test's
// end) for a HOME outside /tmp, with bin in it holding a stand-in bwrap.
func outsideTmp(t *testing.T) (base, bin string) {
	t.Helper()
	base, err := os.MkdirTemp("/var/tmp", "corral-codex-home-test-")
	if err != nil {
		t.Skipf("no writable /var/tmp: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	bin = filepath.Join(base, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "bwrap"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return base, bin
}

// TestPrepareHomeOutsideTmp: with bubblewrap in the sandbox (a stand-in
// on PATH), the per-run CODEX_HOME is made outside /tmp and listed for
// removal after the run; without it, it stays in the run directory.
func TestPrepareHomeOutsideTmp(t *testing.T) {
	h, ctx := newHandle(t)
	base, bin := outsideTmp(t)
	for _, c := range []struct {
		name    string
		path    string
		outside bool
	}{
		{"WithBwrap", bin + ":" + os.Getenv("PATH"), true},
		{"WithoutBwrap", "/nonexistent-bin:/usr/bin:/bin", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !c.outside {
				if _, err := exec.LookPath("bwrap"); err == nil {
					t.Skip("bubblewrap is installed on this host")
				}
			}
			req := baseRequest(t)
			req.Options[OptHome] = "auto"
			req.Env = map[string]string{"HOME": filepath.Join(base, "home"), "PATH": c.path}
			inv, err := Harness{}.Prepare(ctx, h, req)
			if err != nil {
				t.Fatal(err)
			}
			home := inv.Command.Env["CODEX_HOME"]
			want := filepath.Join(req.RunDir, "codex-home")
			if c.outside {
				want = filepath.Join(base, "home", ".corral", "codex", "runs", req.RunID)
			}
			if home != want {
				t.Errorf("CODEX_HOME = %s, want %s", home, want)
			}
			if c.outside != (len(inv.RemoveAfter) == 1 && inv.RemoveAfter[0] == home) {
				t.Errorf("RemoveAfter = %v", inv.RemoveAfter)
			}
			if _, err := os.Stat(filepath.Join(home, "config.toml")); err != nil {
				t.Error(err)
			}
		})
	}
	req := baseRequest(t)
	req.Options[OptHome] = "elsewhere"
	if _, err := (Harness{}).Prepare(ctx, h, req); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("bad home option: %v", err)
	}
}

func TestPrepareAPIKey(t *testing.T) {
	h, ctx := newHandle(t)
	req := baseRequest(t)
	req.Model = "gpt-test"
	req.Args = []string{"--ephemeral"}
	req.Env = map[string]string{"FOO": "bar"}
	req.Options[OptBaseURL] = "http://127.0.0.1:9/v1"
	req.Options[OptExecutable] = "/opt/codex"
	req.Options[OptReasoningEffort] = "low"
	inv, err := Harness{}.Prepare(ctx, h, req)
	if err != nil {
		t.Fatal(err)
	}
	args := inv.Command.Args
	want := []string{"/opt/codex", "exec", "--json", "--skip-git-repo-check", "-s", "workspace-write", "-c", `approval_policy="never"`,
		"-c", "sandbox_workspace_write.network_access=true", "-m", "gpt-test", "-c", `model_reasoning_effort="low"`, "--ephemeral", "-"}
	if !slices.Equal(args, want) {
		t.Errorf("argv\n got %q\nwant %q", args, want)
	}
	if strings.Contains(strings.Join(args, " "), testKey) || strings.Contains(strings.Join(args, " "), "fix the bug") {
		t.Error("the key or the prompt is in argv")
	}
	if string(inv.Stdin) != req.Prompt {
		t.Errorf("stdin %q, want the prompt", inv.Stdin)
	}
	home := filepath.Join(req.RunDir, "codex-home")
	env := inv.Command.Env
	if env["CODEX_HOME"] != home || env["CODEX_API_KEY"] != testKey || env["FOO"] != "bar" {
		t.Errorf("env CODEX_HOME=%q FOO=%q, key set: %v", env["CODEX_HOME"], env["FOO"], env["CODEX_API_KEY"] == testKey)
	}
	cfg, err := os.ReadFile(filepath.Join(home, "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`model_provider = "corral"`, `base_url = "http://127.0.0.1:9/v1"`, `env_key = "CODEX_API_KEY"`, `wire_api = "responses"`} {
		if !strings.Contains(string(cfg), s) {
			t.Errorf("config.toml lacks %s:\n%s", s, cfg)
		}
	}
	if strings.Contains(string(cfg), testKey) {
		t.Error("the key is in config.toml")
	}
	if fi, err := os.Stat(filepath.Join(home, "config.toml")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("config.toml mode: %v %v", fi.Mode(), err)
	}
	if dst, err := os.Readlink(filepath.Join(home, "sessions")); err != nil || dst != req.Options[OptSessionsDir] {
		t.Errorf("sessions link -> %q (%v), want %s", dst, err, req.Options[OptSessionsDir])
	}
	if _, err := os.Stat(filepath.Join(home, "rules")); !os.IsNotExist(err) {
		t.Error("a rules directory without a policy")
	}
}

func TestPrepareErrors(t *testing.T) {
	h, ctx := newHandle(t)
	for _, c := range []struct {
		name string
		edit func(*harness.Request)
		code sandbox.Code
	}{
		{"no prompt", func(r *harness.Request) { r.Prompt = "  " }, sandbox.InvalidArgument},
		{"no key", func(r *harness.Request) { r.Secrets = sandbox.Secrets{} }, sandbox.FailedPrecondition},
		{"bad auth", func(r *harness.Request) { r.Auth = "oauth" }, sandbox.InvalidArgument},
		{"bad sandbox option", func(r *harness.Request) { r.Options[OptSandbox] = "none" }, sandbox.InvalidArgument},
		{"bad policy option", func(r *harness.Request) { r.Options[OptPolicy] = "lax" }, sandbox.InvalidArgument},
		{"host auth with base URL", func(r *harness.Request) { r.Auth = harness.AuthHost; r.Options[OptBaseURL] = "http://x/v1" }, sandbox.InvalidArgument},
		{"no run dir", func(r *harness.Request) { r.RunDir = "" }, sandbox.InvalidArgument},
		{"unenforceable glob", func(r *harness.Request) {
			r.Policy = &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"*sudo*"}}}
		}, sandbox.FailedPrecondition},
		{"default deny", func(r *harness.Request) {
			r.Policy = &sandbox.Policy{Default: sandbox.Deny, FileWrite: sandbox.Allow}
		}, sandbox.FailedPrecondition},
		{"host auth with command rules", func(r *harness.Request) {
			r.Auth = harness.AuthHost
			r.Policy = &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"git push *"}}}
		}, sandbox.FailedPrecondition},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := baseRequest(t)
			c.edit(&req)
			_, err := Harness{}.Prepare(ctx, h, req)
			if got := sandbox.CodeOf(err); got != c.code {
				t.Fatalf("code %v (%v), want %v", got, err, c.code)
			}
			if err != nil && strings.Contains(err.Error(), testKey) {
				t.Error("the key is in the error")
			}
		})
	}
}

func TestPrepareHostAuth(t *testing.T) {
	h, ctx := newHandle(t)
	req := baseRequest(t)
	req.Auth = harness.AuthHost
	req.Env = map[string]string{"OPENAI_API_KEY": "from-env", "HOME": t.TempDir()}
	inv, err := Harness{}.Prepare(ctx, h, req)
	if err != nil {
		t.Fatal(err)
	}
	args := inv.Command.Args
	if !slices.Equal(args[:5], []string{"env", "-u", "OPENAI_API_KEY", "-u", "CODEX_API_KEY"}) || args[5] != "codex" {
		t.Errorf("argv %q", args)
	}
	for _, k := range []string{"CODEX_HOME", "CODEX_API_KEY", "OPENAI_API_KEY"} {
		if _, ok := inv.Command.Env[k]; ok {
			t.Errorf("host auth sets %s", k)
		}
	}
	if _, err := os.Stat(req.RunDir); !os.IsNotExist(err) {
		t.Error("host auth wrote a run directory")
	}
	// Best effort runs a policy with command rules, without the rules.
	req.Policy = &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"git push *"}}}
	req.Options[OptPolicy] = "best-effort"
	if _, err := (Harness{}).Prepare(ctx, h, req); err != nil {
		t.Fatal(err)
	}
}

func TestPrepareResume(t *testing.T) {
	h, ctx := newHandle(t)
	const id = "01a22690-487f-7083-8a61-b1920d3738d9"
	for _, c := range []struct {
		name    string
		session string
		file    string
		resume  bool
	}{
		{"rollout present", id, "2026/11/29/rollout-2026-11-29T09-08-00-" + id + ".jsonl", true},
		{"rollout gone", id, "", false},
		{"other rollout", id, "2026/11/29/rollout-2026-11-29T09-08-00-01a22690-0000-7083-8a61-b1920d3738d9.jsonl", false},
		{"no session", "", "", false},
		{"unsafe id", "../../x*", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := baseRequest(t)
			req.Session = c.session
			if c.file != "" {
				p := filepath.Join(req.Options[OptSessionsDir], c.file)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("{}\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			inv, err := Harness{}.Prepare(ctx, h, req)
			if err != nil {
				t.Fatal(err)
			}
			args := inv.Command.Args
			tail := args[len(args)-3:]
			got := tail[0] == "resume" && tail[1] == id && tail[2] == "-"
			if got != c.resume || args[len(args)-1] != "-" {
				t.Errorf("argv %q, resume %v", args, c.resume)
			}
		})
	}
}

func TestPreparePolicy(t *testing.T) {
	h, ctx := newHandle(t)
	req := baseRequest(t)
	req.Scripts = map[string]string{"deploy": "make deploy"}
	req.Policy = &sandbox.Policy{
		Commands:  sandbox.CommandRules{Allow: []string{"go test *"}, Ask: []string{"git push *"}, Deny: []string{"rm *", "deploy", "rm *"}},
		FileWrite: sandbox.Allow,
		Network:   sandbox.Deny,
	}
	inv, err := Harness{}.Prepare(ctx, h, req)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(inv.Command.Args, " ")
	if !strings.Contains(args, "-s workspace-write") || !strings.Contains(args, "-c sandbox_workspace_write.network_access=false") {
		t.Errorf("argv %s", args)
	}
	rules, err := os.ReadFile(filepath.Join(req.RunDir, "codex-home", "rules", "corral.rules"))
	if err != nil {
		t.Fatal(err)
	}
	want := `# Written by corral from the sandbox policy for one run.
prefix_rule(pattern = ["rm"], decision = "forbidden", justification = "not allowed by the sandbox policy")
prefix_rule(pattern = ["deploy"], decision = "forbidden", justification = "not allowed by the sandbox policy")
prefix_rule(pattern = ["make", "deploy"], decision = "forbidden", justification = "not allowed by the sandbox policy")
prefix_rule(pattern = ["git", "push"], decision = "forbidden", justification = "not allowed by the sandbox policy")
`
	if string(rules) != want {
		t.Errorf("rules:\n%s\nwant:\n%s", rules, want)
	}
}

func TestPlanPolicy(t *testing.T) {
	tr, fa := true, false
	for _, c := range []struct {
		name       string
		p          *sandbox.Policy
		sandbox    string
		network    *bool
		rules      int
		unenforced int
	}{
		{"no policy allows everything", nil, SandboxWorkspaceWrite, &tr, 0, 0},
		{"empty policy", &sandbox.Policy{}, SandboxWorkspaceWrite, nil, 0, 0},
		{"file writes denied", &sandbox.Policy{FileWrite: sandbox.Deny}, SandboxReadOnly, nil, 0, 0},
		{"file writes asked", &sandbox.Policy{FileWrite: sandbox.Ask}, SandboxReadOnly, nil, 0, 0},
		{"network allowed", &sandbox.Policy{Network: sandbox.Allow}, SandboxWorkspaceWrite, &tr, 0, 0},
		{"network asked", &sandbox.Policy{Network: sandbox.Ask}, SandboxWorkspaceWrite, &fa, 0, 0},
		{"default allow", &sandbox.Policy{Default: sandbox.Allow}, SandboxWorkspaceWrite, &tr, 0, 0},
		{"default deny", &sandbox.Policy{Default: sandbox.Deny}, SandboxReadOnly, &fa, 0, 1},
		{"default ask, writes allowed", &sandbox.Policy{Default: sandbox.Ask, FileWrite: sandbox.Allow}, SandboxWorkspaceWrite, &fa, 0, 1},
		{"rules", &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"rm -rf *", "sudo"}, Ask: []string{"curl *"}}}, SandboxWorkspaceWrite, nil, 3, 0},
		{"bad globs", &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"*", "rm*", "echo 'x'", "a | b", "ls *.go"}}}, SandboxWorkspaceWrite, nil, 0, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan := planPolicy(c.p, nil, SandboxWorkspaceWrite)
			if plan.sandbox != c.sandbox || (plan.network == nil) != (c.network == nil) || (plan.network != nil && *plan.network != *c.network) ||
				len(plan.rules) != c.rules || len(plan.unenforced) != c.unenforced {
				t.Errorf("plan %+v (network %v), unenforced %q", plan, plan.network, plan.unenforced)
			}
		})
	}
	// The sandbox option applies only where the policy lets the agent write.
	if plan := planPolicy(&sandbox.Policy{FileWrite: sandbox.Deny}, nil, SandboxFullAccess); plan.sandbox != SandboxReadOnly {
		t.Errorf("sandbox %s", plan.sandbox)
	}
}

const (
	mcpToken  = "mcp-token-secret-51c0"
	mcpHeader = "hdr-secret-value-a9e3"
)

// mcpRequest is baseRequest with secrets for MCP servers.
func mcpRequest(t *testing.T, servers ...sandbox.MCPServer) harness.Request {
	t.Helper()
	req := baseRequest(t)
	secrets, err := sandbox.NewSecrets(map[string]string{"OPENAI_API_KEY": testKey, "TOKEN": mcpToken, "HDR": mcpHeader})
	if err != nil {
		t.Fatal(err)
	}
	req.Secrets = secrets
	req.MCPServers = servers
	return req
}

var (
	stdioServer = sandbox.MCPServer{Name: "probe", Command: "node", Args: []string{"/srv/stub.js", "probe"},
		Env: map[string]string{"PROBE_TOKEN": "${secret:TOKEN}", "MODE": "test"}}
	httpServer = sandbox.MCPServer{Name: "remote_1", URL: "https://mcp.example/api",
		Headers: map[string]string{"Authorization": "Bearer ${secret:HDR}", "X.Trace": "on"}}
)

func TestPrepareMCP(t *testing.T) {
	h, ctx := newHandle(t)
	// What codex must end up with, whichever way it is passed.
	wantServers := map[string]any{
		"probe": map[string]any{"command": "node", "args": []any{"/srv/stub.js", "probe"},
			"env": map[string]any{"MODE": "test"}, "env_vars": []any{"PROBE_TOKEN"}, "default_tools_approval_mode": "approve"},
		"remote_1": map[string]any{"url": "https://mcp.example/api",
			"http_headers": map[string]any{"X.Trace": "on"}, "env_http_headers": map[string]any{"Authorization": "CORRAL_MCP_VALUE_0"},
			"default_tools_approval_mode": "approve"},
	}
	wantEnv := map[string]string{"PROBE_TOKEN": mcpToken, "CORRAL_MCP_VALUE_0": "Bearer " + mcpHeader}
	for _, auth := range []harness.Auth{harness.AuthAPIKey, harness.AuthHost} {
		t.Run(string(auth), func(t *testing.T) {
			req := mcpRequest(t, stdioServer, httpServer)
			req.Auth = auth
			req.Env = map[string]string{"HOME": t.TempDir()}
			inv, err := Harness{}.Prepare(ctx, h, req)
			if err != nil {
				t.Fatal(err)
			}
			argv := strings.Join(inv.Command.Args, "\n")
			for _, secret := range []string{mcpToken, mcpHeader, testKey} {
				if strings.Contains(argv, secret) {
					t.Errorf("a secret is in argv: %q", inv.Command.Args)
				}
			}
			for k, v := range wantEnv {
				if inv.Command.Env[k] != v {
					t.Errorf("env %s does not carry the secret-bearing value", k)
				}
			}
			// The overrides (host auth) or config.toml (api-key auth), read
			// as codex reads them.
			var got map[string]any
			overrides := 0
			cfgDoc := ""
			for i, a := range inv.Command.Args {
				if i > 0 && inv.Command.Args[i-1] == "-c" && strings.HasPrefix(a, "mcp_servers.") {
					overrides++
					cfgDoc += a[:strings.Index(a, "=")] + " = " + a[strings.Index(a, "=")+1:] + "\n"
				}
			}
			cfgPath := filepath.Join(req.RunDir, "codex-home", "config.toml")
			if auth == harness.AuthAPIKey {
				if overrides != 0 {
					t.Errorf("api-key auth passes MCP servers in argv: %q", inv.Command.Args)
				}
				b, err := os.ReadFile(cfgPath)
				if err != nil {
					t.Fatal(err)
				}
				cfgDoc = string(b)
			} else {
				if overrides != 9 {
					t.Errorf("%d -c mcp_servers overrides, want 9: %q", overrides, inv.Command.Args)
				}
				if _, err := os.Stat(req.RunDir); !os.IsNotExist(err) {
					t.Error("host auth wrote a run directory")
				}
			}
			for _, secret := range []string{mcpToken, mcpHeader, testKey} {
				if strings.Contains(cfgDoc, secret) {
					t.Errorf("a secret is in the configuration:\n%s", cfgDoc)
				}
			}
			if err := toml.Unmarshal([]byte(cfgDoc), &got); err != nil {
				t.Fatalf("configuration is not TOML: %v\n%s", err, cfgDoc)
			}
			if !reflect.DeepEqual(got["mcp_servers"], any(wantServers)) {
				t.Errorf("mcp_servers\n got %#v\nwant %#v\nfrom:\n%s", got["mcp_servers"], wantServers, cfgDoc)
			}
		})
	}
}

func TestPrepareMCPErrors(t *testing.T) {
	h, ctx := newHandle(t)
	other := stdioServer
	other.Name = "other"
	other.Env = map[string]string{"PROBE_TOKEN": "${secret:HDR}"}
	same := stdioServer
	same.Name = "same"
	for _, c := range []struct {
		name    string
		servers []sandbox.MCPServer
		env     map[string]string
		code    sandbox.Code
		says    string
	}{
		{"sse", []sandbox.MCPServer{{Name: "events", Type: sandbox.MCPSSE, URL: "https://x/sse"}}, nil, sandbox.FailedPrecondition, `"events"`},
		{"env clash", []sandbox.MCPServer{stdioServer, other}, nil, sandbox.InvalidArgument, "PROBE_TOKEN"},
		{"clash with the run's env", []sandbox.MCPServer{stdioServer}, map[string]string{"PROBE_TOKEN": "x"}, sandbox.InvalidArgument, "PROBE_TOKEN"},
		{"reserved env", []sandbox.MCPServer{{Name: "k", Command: "x", Env: map[string]string{"CODEX_API_KEY": "${secret:TOKEN}"}}}, nil, sandbox.InvalidArgument, "CODEX_API_KEY"},
		{"unknown secret", []sandbox.MCPServer{{Name: "u", Command: "x", Env: map[string]string{"A": "${secret:NOPE}"}}}, nil, sandbox.InvalidArgument, "NOPE"},
		{"secret in args", []sandbox.MCPServer{{Name: "a", Command: "x", Args: []string{"${secret:TOKEN}"}}}, nil, sandbox.InvalidArgument, ""},
		{"bad name", []sandbox.MCPServer{{Name: "a.b", Command: "x"}}, nil, sandbox.InvalidArgument, ""},
		{"same value twice is fine", []sandbox.MCPServer{stdioServer, same}, nil, sandbox.OK, ""},
	} {
		for _, auth := range []harness.Auth{harness.AuthAPIKey, harness.AuthHost} {
			t.Run(c.name+"/"+string(auth), func(t *testing.T) {
				req := mcpRequest(t, c.servers...)
				req.Auth = auth
				req.Env = c.env
				_, err := Harness{}.Prepare(ctx, h, req)
				if got := sandbox.CodeOf(err); got != c.code {
					t.Fatalf("code %v (%v), want %v", got, err, c.code)
				}
				if err == nil {
					return
				}
				if !strings.Contains(err.Error(), c.says) {
					t.Errorf("error %q does not say %s", err, c.says)
				}
				for _, secret := range []string{mcpToken, mcpHeader, testKey} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("a secret is in the error %q", err)
					}
				}
			})
		}
	}
}

func TestPrepareSkills(t *testing.T) {
	h, ctx := newHandle(t)
	root := h.WorkspaceRoot()
	for _, d := range []string{"skills/probe", "packs/x/review", "packs/x/node_modules/dep"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, d, "SKILL.md"), []byte("---\nname: s\ndescription: d\n---\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		auth  harness.Auth
		roots []string
		want  map[string]string // link name -> workspace dir
	}{
		{"api-key", harness.AuthAPIKey, []string{"skills/probe", "packs/x", "missing"}, map[string]string{"probe": "skills/probe", "review": "packs/x/review"}},
		{"api-key without skills", harness.AuthAPIKey, nil, nil},
		{"host", harness.AuthHost, []string{"skills/probe"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := baseRequest(t)
			req.Auth = c.auth
			req.Env = map[string]string{"HOME": t.TempDir()}
			req.SkillRoots = c.roots
			req.WorkspaceRoot = root
			if _, err := (Harness{}).Prepare(ctx, h, req); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(req.RunDir, "codex-home", "skills")
			entries, _ := os.ReadDir(dir)
			got := map[string]string{}
			for _, e := range entries {
				dst, err := os.Readlink(filepath.Join(dir, e.Name()))
				if err != nil {
					t.Errorf("%s is not a link: %v", e.Name(), err)
					continue
				}
				rel, _ := filepath.Rel(root, dst)
				got[e.Name()] = rel
			}
			if len(got) != len(c.want) || (len(got) > 0 && !reflect.DeepEqual(got, c.want)) {
				t.Errorf("skill links %v, want %v", got, c.want)
			}
			if c.auth == harness.AuthHost {
				if _, err := os.Stat(req.RunDir); !os.IsNotExist(err) {
					t.Error("host auth wrote a run directory")
				}
				if entries, _ := os.ReadDir(req.Env["HOME"]); len(entries) > 0 {
					t.Errorf("host auth wrote into HOME: %v", entries)
				}
			}
		})
	}
}

func TestMCPToolsAllowed(t *testing.T) {
	for _, c := range []struct {
		name      string
		policy    *sandbox.Policy
		approvals map[string]bool
		want      bool
	}{
		{"NoPolicy", nil, nil, true},
		{"DefaultAllow", &sandbox.Policy{Default: sandbox.Allow}, nil, true},
		{"DefaultDeny", &sandbox.Policy{Default: sandbox.Deny}, nil, false},
		{"AskUnanswered", &sandbox.Policy{Default: sandbox.Ask}, nil, false},
		{"AskApproved", &sandbox.Policy{Default: sandbox.Ask}, map[string]bool{"codex:tool:mcp__docs": true}, true},
		{"AskDenied", &sandbox.Policy{Default: sandbox.Ask}, map[string]bool{"codex:tool:mcp__docs": false}, false},
		{"AnswerForAnotherServer", &sandbox.Policy{Default: sandbox.Ask}, map[string]bool{"codex:tool:mcp__other": true}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := harness.Request{Policy: c.policy, Approvals: c.approvals}
			if got := toolsDecision(req, "docs").Decision == sandbox.Allow; got != c.want {
				t.Errorf("allowed = %v, want %v", got, c.want)
			}
		})
	}
}
