package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
)

// TestRunWithBrokeredSecret runs corral run (no daemon) with a brokered
// key: it says which secret is brokered and where it may go, serves the
// gateway itself, and the agent's call authenticates at the fake model,
// which accepts only the real key, while the agent's environment holds a
// placeholder.
func TestRunWithBrokeredSecret(t *testing.T) {
	key := "sk-cli-canary-7c1e0b5d"
	model := fakemodel.New(t, fakemodel.Script{APIKey: key, Turns: []fakemodel.Turn{{Text: "answer via gateway"}}})
	dir := t.TempDir()
	cfg, gw := brokeredConfig(t, dir, "", "CLI_KEY", model.URL)
	agent := `env | grep -q ` + key + ` && echo LEAK; case "$ANTHROPIC_API_KEY" in corral-ph1.*) echo placeholder-ok;; esac
curl -sS -H "x-api-key: $ANTHROPIC_API_KEY" -H 'content-type: application/json' -d '{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}' "$ANTHROPIC_BASE_URL/v1/messages"`
	cmd := exec.Command(corralBin, "run", "--config", cfg, "--store", "sqlite:"+filepath.Join(dir, "c.db"), "--", "sh", "-c", agent)
	cmd.Env = append(os.Environ(), "CLI_KEY="+key, "CORRAL_GATEWAY_LISTEN="+gw, "XDG_STATE_HOME="+filepath.Join(dir, "state"))
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("corral run: %v\nstdout %s\nstderr %s", err, out.String(), errb.String())
	}
	for _, w := range []string{"secret ANTHROPIC_API_KEY is brokered", model.URL, "egress gateway: served by this process on " + gw} {
		if !strings.Contains(errb.String(), w) {
			t.Errorf("stderr lacks %q:\n%s", w, errb.String())
		}
	}
	if !strings.Contains(out.String(), "placeholder-ok") || !strings.Contains(out.String(), "answer via gateway") || strings.Contains(out.String(), "LEAK") {
		t.Errorf("stdout:\n%s", out.String())
	}
	if model.Unauthorized() != 0 {
		t.Errorf("%d requests without the real key", model.Unauthorized())
	}
}

// TestServeBrokersSecrets: the daemon serves the egress gateway; a run
// started through it with --server authenticates at the fake model with
// the placeholder its sandbox holds.
func TestServeBrokersSecrets(t *testing.T) {
	key := "sk-serve-canary-2b9d41"
	model := fakemodel.New(t, fakemodel.Script{APIKey: key, Turns: []fakemodel.Turn{{Text: "answer via the daemon's gateway"}}})
	dir := t.TempDir()
	cfg, gw := brokeredConfig(t, dir, "provider:\n  name: local\n  local: {baseDir: "+filepath.Join(dir, "sandboxes")+"}\n", "SERVE_KEY", model.URL)
	stateDir := t.TempDir()
	s := serveCLIEnv(t, stateDir, []string{"SERVE_KEY=" + key}, "--config", cfg, "--gateway-listen", gw)
	if !strings.Contains(s.stderr(), "secret ANTHROPIC_API_KEY is brokered") || !strings.Contains(s.stderr(), "served by this daemon on "+gw) {
		t.Fatalf("the daemon did not say it brokers the secret:\n%s", s.stderr())
	}
	agent := `case "$ANTHROPIC_API_KEY" in corral-ph1.*) echo placeholder-ok;; esac
curl -sS -H "x-api-key: $ANTHROPIC_API_KEY" -H 'content-type: application/json' -d '{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}' "$ANTHROPIC_BASE_URL/v1/messages"`
	out, errOut, code := corralIn(t, cliEnv(stateDir), "run", "--server", s.url, "--", "sh", "-c", agent)
	if code != 0 || !strings.Contains(out, "placeholder-ok") || !strings.Contains(out, "answer via the daemon's gateway") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s\ndaemon %s", code, out, errOut, s.stderr())
	}
	if model.Unauthorized() != 0 {
		t.Errorf("%d requests without the real key", model.Unauthorized())
	}
}

// brokeredConfig writes a corral.yaml (head, then a brokered
// ANTHROPIC_API_KEY read from keyEnv for the model) into dir, and returns
// its path and a free loopback address for the gateway.
func brokeredConfig(t *testing.T, dir, head, keyEnv, modelURL string) (string, string) {
	t.Helper()
	cfg := filepath.Join(dir, "corral.yaml")
	yml := head + "workspace:\n  secrets:\n    ANTHROPIC_API_KEY: {env: " + keyEnv + ", broker: {hosts: [\"" + modelURL + "\"], header: x-api-key}}\n"
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return cfg, ln.Addr().String()
}

// TestClaudeRunWithBrokeredKey: corral run --harness claude-code with a
// brokered key completes a tool-using run against the fake model, which
// accepts only the real key, while the sandbox's agent holds a placeholder.
func TestClaudeRunWithBrokeredKey(t *testing.T) {
	bin := testutil.AgentBin(t, "claude")
	if !harnessRegistered(t, "claude-code") {
		t.Skip("this corral has no claude-code harness registered (cmd/corral/harnesses.go)")
	}
	key := "sk-ant-cli-canary-90f3aa"
	model := fakemodel.New(t, fakemodel.Script{APIKey: key, Turns: []fakemodel.Turn{
		{Command: `case "$ANTHROPIC_API_KEY" in corral-ph1.*) echo placeholder-in-the-tool;; esac`}, {Text: "Done through the gateway."}}})
	dir := t.TempDir()
	cfg, gw := brokeredConfig(t, dir, "", "CLI_KEY", model.URL)
	cmd := exec.Command(corralBin, "run", "--config", cfg, "--store", "sqlite:"+filepath.Join(dir, "c.db"), "--harness", "claude-code",
		"--model", "claude-sonnet-4-5", "--option", "executable="+bin, "--option", "isSandbox=true", "check the key")
	cmd.Env = append(os.Environ(), "CLI_KEY="+key, "CORRAL_GATEWAY_LISTEN="+gw, "XDG_STATE_HOME="+filepath.Join(dir, "state"),
		"HOME="+t.TempDir(), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("corral run: %v\nstdout %s\nstderr %s", err, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "Done through the gateway.") || !strings.Contains(errb.String(), "secret ANTHROPIC_API_KEY is brokered") {
		t.Fatalf("stdout %s\nstderr %s", out.String(), errb.String())
	}
	if model.Unauthorized() != 0 || len(model.ModelRequests()) < 2 {
		t.Errorf("%d model requests, %d without the real key", len(model.ModelRequests()), model.Unauthorized())
	}
	found := false
	for _, r := range model.ModelRequests() {
		found = found || strings.Contains(string(r.Body), "placeholder-in-the-tool")
	}
	if !found {
		t.Error("the tool's output (the placeholder check) did not reach the model")
	}
}
