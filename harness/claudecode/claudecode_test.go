package claudecode_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/claudecode"
	"github.com/d10ffeed/corral/sandbox"
)

// flagValue returns the argument after flag in argv, or "".
func flagValue(argv []string, flag string) string {
	for i, a := range argv {
		if a == flag && i+1 < len(argv) {
			return argv[i+1]
		}
	}
	return ""
}

func baseRequest(t *testing.T, h sandbox.Handle) harness.Request {
	t.Helper()
	secrets, err := sandbox.NewSecrets(map[string]string{claudecode.APIKeySecret: "sk-ant-secret-value", "OTHER": "x"})
	if err != nil {
		t.Fatal(err)
	}
	return harness.Request{
		Run: harness.Run{RunID: "run-1", ThreadID: "t"}, Prompt: "do the thing", Model: "claude-sonnet-4-5",
		Secrets: secrets, Env: map[string]string{"HOME": t.TempDir()}, WorkspaceRoot: h.WorkspaceRoot(),
		RunDir: filepath.Join(t.TempDir(), "run.d"),
	}
}

func TestPrepareCommand(t *testing.T) {
	h := localHandle(t)
	ctx := testCtx(t)
	for _, tt := range []struct {
		name  string
		edit  func(*harness.Request)
		check func(t *testing.T, argv []string, env map[string]string)
	}{
		{"api-key default", func(r *harness.Request) { r.Options = map[string]string{"baseURL": "http://127.0.0.1:1"} }, func(t *testing.T, argv []string, env map[string]string) {
			want := []string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages", "--setting-sources", "user", "--model", "claude-sonnet-4-5", "--permission-mode", "bypassPermissions"}
			if !slices.Equal(argv, want) {
				t.Errorf("argv %q\nwant %q", argv, want)
			}
			if env["ANTHROPIC_API_KEY"] != "sk-ant-secret-value" || env["ANTHROPIC_BASE_URL"] != "http://127.0.0.1:1" || env["OTHER"] != "" {
				t.Errorf("env %v", env)
			}
		}},
		{"host auth", func(r *harness.Request) {
			r.Auth = harness.AuthHost
			r.Env["ANTHROPIC_API_KEY"] = "from-env"
		}, func(t *testing.T, argv []string, env map[string]string) {
			if !slices.Equal(argv[:7], []string{"env", "-u", "ANTHROPIC_API_KEY", "-u", "ANTHROPIC_AUTH_TOKEN", "-u", "ANTHROPIC_BASE_URL"}) || argv[7] != "claude" {
				t.Errorf("argv %q", argv)
			}
			if _, ok := env["ANTHROPIC_API_KEY"]; ok {
				t.Errorf("host auth passes a key: %v", env)
			}
		}},
		{"executable and extra args", func(r *harness.Request) {
			r.Options = map[string]string{"executable": "node /opt/cli.js", "partialMessages": "false"}
			r.Model = ""
			r.Args = []string{"--max-turns", "3"}
		}, func(t *testing.T, argv []string, _ map[string]string) {
			if argv[0] != "node" || argv[1] != "/opt/cli.js" || slices.Contains(argv, "--include-partial-messages") || slices.Contains(argv, "--model") || !slices.Equal(argv[len(argv)-2:], []string{"--max-turns", "3"}) {
				t.Errorf("argv %q", argv)
			}
		}},
		{"on the host: no IS_SANDBOX", nil, func(t *testing.T, _ []string, env map[string]string) {
			if _, ok := env["IS_SANDBOX"]; ok {
				t.Error("IS_SANDBOX set for a sandbox that is the host")
			}
		}},
		{"isSandbox override", func(r *harness.Request) { r.Options = map[string]string{"isSandbox": "true"} }, func(t *testing.T, _ []string, env map[string]string) {
			if env["IS_SANDBOX"] != "1" {
				t.Error("IS_SANDBOX not set")
			}
		}},
		{"policy with rules", func(r *harness.Request) {
			r.Policy = &sandbox.Policy{Commands: sandbox.CommandRules{Allow: []string{"go test *"}, Deny: []string{"rm *", "weird (pattern)"}}, FileWrite: sandbox.Deny}
		}, func(t *testing.T, argv []string, _ map[string]string) {
			if flagValue(argv, "--permission-mode") != "default" || flagValue(argv, "--permission-prompt-tool") != "mcp__corral__approve" {
				t.Errorf("argv %q", argv)
			}
			if got := flagValue(argv, "--disallowedTools"); got != "Bash(rm *),Write,Edit,MultiEdit,NotebookEdit" {
				t.Errorf("--disallowedTools %q", got)
			}
			if !strings.Contains(flagValue(argv, "--settings"), `"ask":["Bash","Write"`) {
				t.Errorf("--settings %q", flagValue(argv, "--settings"))
			}
			mcp, err := os.ReadFile(flagValue(argv, "--mcp-config"))
			if err != nil || !strings.Contains(string(mcp), "approve.js") {
				t.Errorf("mcp config %s %v", mcp, err)
			}
		}},
		{"forced mode", func(r *harness.Request) {
			r.Policy = &sandbox.Policy{Default: sandbox.Allow}
			r.Options = map[string]string{"permissionMode": "acceptEdits"}
		}, func(t *testing.T, argv []string, _ map[string]string) {
			if flagValue(argv, "--permission-mode") != "acceptEdits" {
				t.Errorf("argv %q", argv)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := baseRequest(t, h)
			if tt.edit != nil {
				tt.edit(&req)
			}
			inv, err := claudecode.Harness{}.Prepare(ctx, h, req)
			if err != nil {
				t.Fatal(err)
			}
			if string(inv.Stdin) != req.Prompt {
				t.Errorf("stdin %q", inv.Stdin)
			}
			for _, a := range inv.Command.Args {
				if strings.Contains(a, "sk-ant-secret-value") || strings.Contains(a, req.Prompt) {
					t.Errorf("a secret or the prompt in argv: %q", a)
				}
			}
			tt.check(t, inv.Command.Args, inv.Command.Env)
		})
	}
}

func TestPrepareRejects(t *testing.T) {
	h := localHandle(t)
	ctx := testCtx(t)
	rules := &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"sudo *"}}}
	for _, tt := range []struct {
		name string
		edit func(*harness.Request)
		want string
	}{
		{"empty prompt", func(r *harness.Request) { r.Prompt = " " }, "prompt is empty"},
		{"unknown option", func(r *harness.Request) { r.Options = map[string]string{"exectuable": "x"} }, "unknown option exectuable"},
		{"unknown auth", func(r *harness.Request) { r.Auth = "oauth" }, "unknown auth mode"},
		{"baseURL with host auth", func(r *harness.Request) {
			r.Auth = harness.AuthHost
			r.Options = map[string]string{"baseURL": "http://x"}
		}, "needs api-key auth"},
		{"bypass with rules", func(r *harness.Request) {
			r.Policy = rules
			r.Options = map[string]string{"permissionMode": "bypassPermissions"}
		}, "would ignore"},
		{"unknown mode", func(r *harness.Request) { r.Options = map[string]string{"permissionMode": "yolo"} }, "unknown permission mode"},
		{"bad isSandbox", func(r *harness.Request) { r.Options = map[string]string{"isSandbox": "maybe"} }, "isSandbox"},
		{"bad session", func(r *harness.Request) { r.Session = "../../etc/passwd" }, "malformed session"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := baseRequest(t, h)
			tt.edit(&req)
			_, err := claudecode.Harness{}.Prepare(ctx, h, req)
			if sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err %v, want InvalidArgument containing %q", err, tt.want)
			}
		})
	}
}

func TestPrepareSession(t *testing.T) {
	h := localHandle(t)
	ctx := testCtx(t)
	const sid = "0f6c1a2e-1111-4222-8333-944455556666"
	req := baseRequest(t, h)
	req.Session = sid
	inv, err := claudecode.Harness{}.Prepare(ctx, h, req)
	if err != nil {
		t.Fatal(err)
	}
	argv := inv.Command.Args
	if slices.Contains(argv, "--resume") || argv[0] != "sh" || !strings.Contains(argv[4], `"resume_failed"`) || !strings.Contains(argv[4], sid) {
		t.Fatalf("a missing session: argv %q", argv)
	}
	// The wrapper prints the note, then runs the CLI with its stdin.
	wrapped := append(append([]string{}, argv[:5]...), "cat")
	res, err := h.Exec(ctx, sandbox.Command{Args: wrapped, Stdin: strings.NewReader("prompt")})
	if err != nil || !strings.HasPrefix(string(res.Stdout), `{"session_id":"`+sid+`","subtype":"resume_failed","type":"corral"}`+"\n") || !strings.HasSuffix(string(res.Stdout), "\nprompt") {
		t.Errorf("wrapper: %q %v", res.Stdout, err)
	}

	// With the transcript in the CLI's config dir the run resumes.
	dir := filepath.Join(req.Env["HOME"], ".claude", "projects", "-some-project")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, sid+".jsonl"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inv, err = claudecode.Harness{}.Prepare(ctx, h, req)
	if err != nil {
		t.Fatal(err)
	}
	if flagValue(inv.Command.Args, "--resume") != sid || inv.Command.Args[0] != "claude" {
		t.Errorf("argv %q", inv.Command.Args)
	}
}

// TestApproveToolMatchesPolicy runs the permission tool (approve.js) under
// node and checks that it decides exactly as sandbox.Policy does, and
// answers allow with updatedInput.
func TestApproveToolMatchesPolicy(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	h := localHandle(t)
	ctx := testCtx(t)
	scripts := map[string]string{"test": "go test ./...", "lint": "  golangci-lint run "}
	policy := &sandbox.Policy{
		Commands: sandbox.CommandRules{
			Allow: []string{"echo *", "test", "git status"},
			Ask:   []string{"git push*", "golangci-lint run"},
			Deny:  []string{"rm -rf *", "curl *|*", "a.b(c)[d]{e}+?^$\\"},
		},
		FileWrite: sandbox.Allow, Network: sandbox.Ask, Default: sandbox.Deny,
	}
	req := baseRequest(t, h)
	req.Policy, req.Scripts = policy, scripts
	inv, err := claudecode.Harness{}.Prepare(ctx, h, req)
	if err != nil {
		t.Fatal(err)
	}
	var mcp struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	raw, err := os.ReadFile(flagValue(inv.Command.Args, "--mcp-config"))
	if err != nil || json.Unmarshal(raw, &mcp) != nil {
		t.Fatalf("mcp config %s %v", raw, err)
	}
	srv := mcp.MCPServers["corral"]
	cmd := exec.CommandContext(ctx, srv.Command, srv.Args...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	rd := bufio.NewReader(stdout)
	id := 0
	call := func(method string, params any) map[string]any {
		t.Helper()
		id++
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		if _, err := stdin.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		var resp map[string]any
		if err := json.Unmarshal([]byte(line), &resp); err != nil || resp["id"] != float64(id) {
			t.Fatalf("reply %q: %v", line, err)
		}
		return resp
	}
	if r := call("initialize", map[string]any{"protocolVersion": "2025-06-18"}); r["result"].(map[string]any)["protocolVersion"] != "2025-06-18" {
		t.Errorf("initialize %v", r)
	}
	_, _ = stdin.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"))
	if r := call("tools/list", map[string]any{}); !strings.Contains(fmt.Sprint(r), "approve") {
		t.Errorf("tools/list %v", r)
	}
	if r := call("bogus/method", nil); r["error"] == nil {
		t.Errorf("unknown method answered %v", r)
	}
	decide := func(tool string, input map[string]any) (string, map[string]any) {
		t.Helper()
		r := call("tools/call", map[string]any{"name": "approve", "arguments": map[string]any{"tool_name": tool, "input": input, "tool_use_id": "x"}})
		text := r["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"].(string)
		var d map[string]any
		if err := json.Unmarshal([]byte(text), &d); err != nil {
			t.Fatalf("reply text %q", text)
		}
		return d["behavior"].(string), d
	}
	for _, c := range []string{
		"echo hi", "echo", "echo hi\nrm -rf /", "  echo padded  ", "go test ./...", "test", "git status", "git status --short",
		"git push origin main", "git push", "golangci-lint run", "lint", "rm -rf /", "rm -rf", "curl x|sh", "curl x",
		"a.b(c)[d]{e}+?^$\\", "ab(c)[d]{e}+?^$\\", "ls", "",
	} {
		want := policy.EvaluateCommand(c, scripts)
		behavior, d := decide("Bash", map[string]any{"command": c, "description": "d"})
		switch want {
		case sandbox.Allow:
			if behavior != "allow" || d["updatedInput"].(map[string]any)["command"] != c {
				t.Errorf("%q: %v, want allow with updatedInput", c, d)
			}
		case sandbox.Ask:
			if behavior != "deny" || !strings.Contains(d["message"].(string), "corral-approval: ") || !strings.Contains(d["message"].(string), `"approvalId":"claude-code:command:`) {
				t.Errorf("%q: %v, want an approval denial", c, d)
			}
		case sandbox.Deny:
			if behavior != "deny" || strings.Contains(fmt.Sprint(d["message"]), "corral-approval") {
				t.Errorf("%q: %v, want deny", c, d)
			}
		}
	}
	if b, _ := decide("Write", map[string]any{"file_path": "/w/x"}); b != "allow" {
		t.Errorf("Write: %s (fileWrite allow)", b)
	}
	if _, d := decide("WebFetch", map[string]any{"url": "https://x"}); !strings.Contains(fmt.Sprint(d["message"]), `"kind":"network"`) {
		t.Errorf("WebFetch: %v (network ask)", d)
	}
	if b, _ := decide("Task", map[string]any{}); b != "deny" {
		t.Errorf("Task: %s (default deny)", b)
	}
}

// TestPolicyNeedsNode: a policy that guards anything is enforced by
// corral's permission tool, which runs on node; in a sandbox without node
// the run is refused rather than run with a weaker guard, unless option
// policy=best-effort asks for Claude Code's own rules.
func TestPolicyNeedsNode(t *testing.T) {
	h := localHandle(t)
	ctx := testCtx(t)
	req := baseRequest(t, h)
	req.Env["PATH"] = t.TempDir() // no node
	req.Policy = &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"rm *"}}, Default: sandbox.Allow}
	_, err := claudecode.Harness{}.Prepare(ctx, h, req)
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), "node") || !strings.Contains(err.Error(), "policy=best-effort") {
		t.Fatalf("without node: %v, want FailedPrecondition naming node and policy=best-effort", err)
	}
	req.Options = map[string]string{claudecode.OptPolicy: "best-effort"}
	inv, err := claudecode.Harness{}.Prepare(ctx, h, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := flagValue(inv.Command.Args, "--permission-mode"); got != claudecode.ModeDontAsk || !slices.Contains(inv.Command.Args, "Bash(rm *)") {
		t.Errorf("best-effort argv %q: want dontAsk with the deny rule", inv.Command.Args)
	}
	req.Options = map[string]string{claudecode.OptPolicy: "loose"}
	if _, err := (claudecode.Harness{}).Prepare(ctx, h, req); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("a bad policy option: %v", err)
	}
	// No policy needs no tool, so no node.
	req.Options, req.Policy = nil, nil
	if _, err := (claudecode.Harness{}).Prepare(ctx, h, req); err != nil {
		t.Errorf("no policy without node: %v", err)
	}
}
