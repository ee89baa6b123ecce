package claudecode_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/claudecode"
	"github.com/d10ffeed/corral/sandbox"
)

const projSecret = "s3cr3t-probe-value"

// projRequest is baseRequest with a PROBE secret.
func projRequest(t *testing.T, h sandbox.Handle) harness.Request {
	t.Helper()
	req := baseRequest(t, h)
	secrets, err := sandbox.NewSecrets(map[string]string{claudecode.APIKeySecret: "sk-ant-secret-value", "PROBE": projSecret})
	if err != nil {
		t.Fatal(err)
	}
	req.Secrets = secrets
	return req
}

// workspaceFiles lists the workspace's files (relative, sorted), .git
// left out.
func workspaceFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// mcpFile reads the --mcp-config file of argv.
func mcpFile(t *testing.T, argv []string) (raw []byte, servers map[string]map[string]any) {
	t.Helper()
	p := flagValue(argv, "--mcp-config")
	if p == "" {
		t.Fatalf("no --mcp-config in %q", argv)
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mcp config mode %v %v, want 0600", fi.Mode(), err)
	}
	var cfg struct {
		MCPServers map[string]map[string]any `json:"mcpServers"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("mcp config %s: %v", raw, err)
	}
	return raw, cfg.MCPServers
}

func asJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestPrepareProjection(t *testing.T) {
	h := localHandle(t)
	ctx := testCtx(t)
	root := h.WorkspaceRoot()
	for _, f := range []string{"skills/review/SKILL.md", "skills/deep/lint/SKILL.md", "skills/node_modules/x/SKILL.md", "other/review/SKILL.md"} {
		if err := h.FS().WriteFile(ctx, f, []byte("---\nname: x\ndescription: y\n---\n")); err != nil {
			t.Fatal(err)
		}
	}
	stdio := sandbox.MCPServer{Name: "probe", Command: "node", Args: []string{"/opt/stub.js", "probe", "${HOME}/x"},
		Env: map[string]string{"TOKEN": "${secret:PROBE}", "PLAIN": "plain", "MIXED": "a-${secret:PROBE}-b"}}
	remote := sandbox.MCPServer{Name: "remote", URL: "https://mcp.example/api", Headers: map[string]string{"Authorization": "Bearer ${secret:PROBE}", "X-Plain": "p"}}
	events := sandbox.MCPServer{Name: "events", Type: "sse", URL: "https://mcp.example/sse"}
	rules := &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"rm *"}}, Default: sandbox.Allow}

	for _, tt := range []struct {
		name  string
		edit  func(*harness.Request)
		check func(t *testing.T, req harness.Request, argv []string, env map[string]string)
	}{
		{"nothing to project", nil, func(t *testing.T, _ harness.Request, argv []string, env map[string]string) {
			if slices.Contains(argv, "--mcp-config") || slices.Contains(argv, "--plugin-dir") {
				t.Errorf("argv %q", argv)
			}
			for k := range env {
				if strings.HasPrefix(k, "CORRAL_MCP_") {
					t.Errorf("env %s", k)
				}
			}
		}},
		{"skills as a plugin", func(r *harness.Request) { r.SkillRoots = []string{"skills", "other", "missing"} }, func(t *testing.T, req harness.Request, argv []string, _ map[string]string) {
			dir := filepath.Join(req.RunDir, "claude-plugin")
			if flagValue(argv, "--plugin-dir") != dir || slices.Contains(argv, "--mcp-config") {
				t.Fatalf("argv %q", argv)
			}
			var manifest map[string]any
			raw, err := os.ReadFile(filepath.Join(dir, ".claude-plugin", "plugin.json"))
			if err != nil || json.Unmarshal(raw, &manifest) != nil || manifest["name"] != "corral-workspace" {
				t.Errorf("plugin.json %s %v", raw, err)
			}
			entries, err := os.ReadDir(filepath.Join(dir, "skills"))
			if err != nil {
				t.Fatal(err)
			}
			links := map[string]string{}
			for _, e := range entries {
				target, err := os.Readlink(filepath.Join(dir, "skills", e.Name()))
				if err != nil {
					t.Errorf("%s is not a link: %v", e.Name(), err)
				}
				links[e.Name()] = target
			}
			want := map[string]string{
				"lint":     filepath.Join(root, "skills/deep/lint"),
				"review":   filepath.Join(root, "other/review"),
				"review-2": filepath.Join(root, "skills/review"),
			}
			if asJSON(links) != asJSON(want) {
				t.Errorf("links %v\nwant  %v", links, want)
			}
		}},
		{"servers without the permission tool", func(r *harness.Request) {
			r.MCPServers = []sandbox.MCPServer{stdio, remote, events}
		}, func(t *testing.T, _ harness.Request, argv []string, env map[string]string) {
			raw, servers := mcpFile(t, argv)
			want := map[string]any{
				"probe": map[string]any{"type": "stdio", "command": "node", "args": []any{"/opt/stub.js", "probe", "${CORRAL_MCP_VALUE_0}"},
					"env": map[string]any{"MIXED": "${CORRAL_MCP_VALUE_1}", "PLAIN": "plain", "TOKEN": "${CORRAL_MCP_VALUE_2}"}},
				"remote": map[string]any{"type": "http", "url": "https://mcp.example/api", "headers": map[string]any{"Authorization": "${CORRAL_MCP_VALUE_3}", "X-Plain": "p"}},
				"events": map[string]any{"type": "sse", "url": "https://mcp.example/sse", "headers": map[string]any{}},
			}
			if asJSON(servers) != asJSON(want) {
				t.Errorf("mcpServers %s\nwant       %s", asJSON(servers), asJSON(want))
			}
			if strings.Contains(string(raw), projSecret) {
				t.Errorf("the secret is in the config file: %s", raw)
			}
			wantEnv := map[string]string{
				"CORRAL_MCP_VALUE_0": "${HOME}/x", // literal: the CLI expands only the reference
				"CORRAL_MCP_VALUE_1": "a-" + projSecret + "-b",
				"CORRAL_MCP_VALUE_2": projSecret,
				"CORRAL_MCP_VALUE_3": "Bearer " + projSecret,
			}
			for k, v := range wantEnv {
				if env[k] != v {
					t.Errorf("env %s = %q, want %q", k, env[k], v)
				}
			}
			if flagValue(argv, "--permission-prompt-tool") != "" {
				t.Errorf("argv %q", argv)
			}
		}},
		{"servers with the permission tool", func(r *harness.Request) {
			r.Policy = rules
			r.MCPServers = []sandbox.MCPServer{stdio}
			r.SkillRoots = []string{"skills"}
		}, func(t *testing.T, req harness.Request, argv []string, _ map[string]string) {
			if _, err := exec.LookPath("node"); err != nil {
				t.Skip("node is not installed: no permission tool")
			}
			n := 0
			for i, a := range argv {
				if a == "--mcp-config" {
					n++
					// The flag takes several values: an option follows it.
					if i+2 >= len(argv) || !strings.HasPrefix(argv[i+2], "--") {
						t.Errorf("--mcp-config is not followed by an option: %q", argv)
					}
				}
			}
			if n != 1 || flagValue(argv, "--permission-prompt-tool") != "mcp__corral__approve" || flagValue(argv, "--plugin-dir") == "" {
				t.Fatalf("argv %q", argv)
			}
			_, servers := mcpFile(t, argv)
			if len(servers) != 2 || servers["probe"]["command"] != "node" || !strings.Contains(asJSON(servers["corral"]), filepath.Join(req.RunDir, "approve.js")) {
				t.Errorf("mcpServers %s", asJSON(servers))
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := projRequest(t, h)
			if tt.edit != nil {
				tt.edit(&req)
			}
			before := workspaceFiles(t, root)
			inv, err := claudecode.Harness{}.Prepare(ctx, h, req)
			if err != nil {
				t.Fatal(err)
			}
			if after := workspaceFiles(t, root); !slices.Equal(before, after) {
				t.Errorf("Prepare wrote into the workspace: %v, was %v", after, before)
			}
			for _, a := range inv.Command.Args {
				if strings.Contains(a, projSecret) {
					t.Errorf("a secret in argv: %q", a)
				}
			}
			tt.check(t, req, inv.Command.Args, inv.Command.Env)
		})
	}
}

func TestPrepareProjectionRejects(t *testing.T) {
	h := localHandle(t)
	ctx := testCtx(t)
	if err := h.FS().WriteFile(ctx, "skills/a/SKILL.md", []byte("---\nname: a\n---\n")); err != nil {
		t.Fatal(err)
	}
	ok := sandbox.MCPServer{Name: "probe", Command: "node", Env: map[string]string{"T": "${secret:PROBE}"}}
	for _, tt := range []struct {
		name string
		edit func(*harness.Request)
		code sandbox.Code
		want string
	}{
		{"the permission tool's name", func(r *harness.Request) {
			r.MCPServers = []sandbox.MCPServer{ok, {Name: "corral", Command: "node"}}
		}, sandbox.InvalidArgument, `"corral" is reserved`},
		{"the name clashes without the tool too", func(r *harness.Request) {
			r.MCPServers = []sandbox.MCPServer{{Name: "corral", URL: "https://x"}}
		}, sandbox.InvalidArgument, `"corral" is reserved`},
		{"unknown secret", func(r *harness.Request) {
			r.MCPServers = []sandbox.MCPServer{{Name: "probe", Command: "node", Env: map[string]string{"T": "${secret:NOPE}"}}}
		}, sandbox.InvalidArgument, "NOPE"},
		{"a secret in args", func(r *harness.Request) {
			r.MCPServers = []sandbox.MCPServer{{Name: "probe", Command: "node", Args: []string{"--token=${secret:PROBE}"}}}
		}, sandbox.InvalidArgument, "only in headers and env"},
		{"both url and command", func(r *harness.Request) {
			r.MCPServers = []sandbox.MCPServer{{Name: "probe", Command: "node", URL: "https://x"}}
		}, sandbox.InvalidArgument, "exactly one of url and command"},
		{"servers without a run directory", func(r *harness.Request) {
			r.MCPServers = []sandbox.MCPServer{ok}
			r.RunDir = ""
		}, sandbox.FailedPrecondition, "run directory"},
		{"skills without a run directory", func(r *harness.Request) {
			r.SkillRoots = []string{"skills"}
			r.RunDir = ""
		}, sandbox.FailedPrecondition, "run directory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := projRequest(t, h)
			tt.edit(&req)
			_, err := claudecode.Harness{}.Prepare(ctx, h, req)
			if sandbox.CodeOf(err) != tt.code || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want %s containing %q", err, tt.code, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), projSecret) {
				t.Errorf("the error carries the secret: %v", err)
			}
		})
	}
}
