package harness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/acp"
	"github.com/d10ffeed/corral/harness/claudecode"
	"github.com/d10ffeed/corral/harness/codex"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/harness/grokbuild"
	"github.com/d10ffeed/corral/harness/opencode"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/sandbox"
)

// TestNoPolicyIsAllowForEveryHarness: a run without a policy gets the same
// effective default in every harness — everything allowed, exactly as
// under Policy{Default: allow} — and each harness's own mapping of it
// says "allowed" (no prompt, no refusal, no approval asked).
func TestNoPolicyIsAllowForEveryHarness(t *testing.T) {
	secrets, err := sandbox.NewSecrets(map[string]string{claudecode.APIKeySecret: "sk-ant-test", "OPENAI_API_KEY": "sk-test", "XAI_API_KEY": "xai-test"})
	if err != nil {
		t.Fatal(err)
	}
	allowAll := &sandbox.Policy{Default: sandbox.Allow}
	cases := []struct {
		name string
		h    harness.Harness
		opts map[string]string
		// allowed checks that the invocation means "allowed" in the
		// harness's own terms; nil for acp, whose gates are checked on a
		// played turn.
		allowed func(t *testing.T, inv harness.Invocation, files map[string]string)
	}{
		{"command", command.Harness{}, nil, func(t *testing.T, inv harness.Invocation, _ map[string]string) {
			// Nothing to gate: the program runs as given.
			if !slices.Equal(inv.Command.Args, []string{"true"}) {
				t.Errorf("argv %q", inv.Command.Args)
			}
		}},
		{"claude-code", claudecode.Harness{}, map[string]string{"baseURL": "http://127.0.0.1:1"}, func(t *testing.T, inv harness.Invocation, _ map[string]string) {
			if flagAfter(inv.Command.Args, "--permission-mode") != claudecode.ModeBypass || slices.Contains(inv.Command.Args, "--permission-prompt-tool") {
				t.Errorf("argv %q: want bypassPermissions and no prompt tool", inv.Command.Args)
			}
		}},
		{"codex", codex.Harness{}, map[string]string{codex.OptSessionsDir: t.TempDir(), codex.OptHome: "run"}, func(t *testing.T, inv harness.Invocation, _ map[string]string) {
			args := strings.Join(inv.Command.Args, " ")
			if !strings.Contains(args, "-s "+codex.SandboxWorkspaceWrite) || !strings.Contains(args, "sandbox_workspace_write.network_access=true") {
				t.Errorf("argv %q: want workspace-write with network", inv.Command.Args)
			}
		}},
		{"opencode", opencode.Harness{}, nil, func(t *testing.T, inv harness.Invocation, _ map[string]string) {
			want := `{"permission":{"bash":"allow","edit":"allow","webfetch":"allow","websearch":"allow"}}`
			if got := inv.Command.Env["OPENCODE_CONFIG_CONTENT"]; got != want {
				t.Errorf("OPENCODE_CONFIG_CONTENT %s, want %s", got, want)
			}
		}},
		{"opencode server", opencode.Harness{}, map[string]string{opencode.OptMode: opencode.ModeServer}, func(t *testing.T, _ harness.Invocation, files map[string]string) {
			var cfg struct {
				Policy struct {
					Default string `json:"default"`
				} `json:"policy"`
			}
			if err := json.Unmarshal([]byte(files["serve.json"]), &cfg); err != nil || cfg.Policy.Default != "allow" {
				t.Errorf("serve.json policy default %q (%v): the client must allow what OpenCode asks", cfg.Policy.Default, err)
			}
		}},
		{"grok", grokbuild.Harness{}, nil, func(t *testing.T, inv harness.Invocation, _ map[string]string) {
			if !slices.Contains(inv.Command.Args, "--always-approve") || slices.Contains(inv.Command.Args, "--deny") {
				t.Errorf("argv %q: want --always-approve and no --deny", inv.Command.Args)
			}
		}},
		{"acp", nil, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "acp" {
				none, allow := acpTurn(t, nil), acpTurn(t, allowAll)
				if none != allow {
					t.Errorf("no policy:\n%s\nDefault allow:\n%s", none, allow)
				}
				if want := "approvals: 0; command: hello; notes.txt: hello from acp"; none != want {
					t.Errorf("no policy: %s, want %s", none, want)
				}
				return
			}
			if _, err := exec.LookPath("node"); err != nil && c.name == "opencode server" {
				testutil.Unavailable(t, "server mode needs node")
			}
			hd := testutil.LocalSandbox(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			runDir, home := filepath.Join(t.TempDir(), "run.d"), t.TempDir()
			prepare := func(p *sandbox.Policy) (harness.Invocation, map[string]string) {
				t.Helper()
				if err := os.RemoveAll(runDir); err != nil {
					t.Fatal(err)
				}
				req := harness.Request{Run: harness.Run{RunID: "run-1", ThreadID: "t"}, Prompt: "p", Secrets: secrets, Policy: p,
					Options: c.opts, WorkspaceRoot: hd.WorkspaceRoot(), RunDir: runDir, Env: map[string]string{"HOME": home}}
				if c.name == "command" {
					req.Args = []string{"true"}
				}
				inv, err := c.h.Prepare(ctx, hd, req)
				if err != nil {
					t.Fatal(err)
				}
				return inv, readTree(t, runDir)
			}
			none, noneFiles := prepare(nil)
			allow, allowFiles := prepare(allowAll)
			if !reflect.DeepEqual(none, allow) {
				t.Errorf("no policy and Default allow differ:\n%+v\n%+v", none, allow)
			}
			if !reflect.DeepEqual(noneFiles, allowFiles) {
				t.Errorf("no policy and Default allow write different run files:\n%v\n%v", noneFiles, allowFiles)
			}
			c.allowed(t, none, noneFiles)
		})
	}
}

// readTree returns the regular files under dir by relative path (symbolic
// links by their target).
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.Type()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			out[rel] = "-> " + target
			return err
		}
		b, err := os.ReadFile(p)
		out[rel] = string(b)
		return err
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return out
}

func flagAfter(argv []string, flag string) string {
	for i, a := range argv {
		if a == flag && i+1 < len(argv) {
			return argv[i+1]
		}
	}
	return ""
}

// acpTurn plays the scripted ACP agent's turn (a permission request and a
// terminal for "echo hello", a permission request and a file write for
// notes.txt) under p and sums up what the policy let happen.
func acpTurn(t *testing.T, p *sandbox.Policy) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go tool is needed to build the scripted agent")
	}
	bin := filepath.Join(t.TempDir(), "acpagent")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/d10ffeed/corral/internal/acpagent").CombinedOutput(); err != nil {
		t.Fatalf("building the scripted agent: %v\n%s", err, out)
	}
	hd := testutil.LocalSandbox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h := acp.New(acp.Options{StartTimeout: 30 * time.Second, ExitGrace: 2 * time.Second})
	defer func() { _ = h.Close(ctx) }()
	paths, err := journal.PathsFor(t.TempDir(), "run-1")
	if err != nil {
		t.Fatal(err)
	}
	run := harness.Run{RunID: "run-1", ThreadID: "t"}
	inv, err := h.Prepare(ctx, hd, harness.Request{Run: run, Prompt: "p", Args: []string{bin}, Policy: p,
		RunDir: paths.Files, WorkspaceRoot: hd.WorkspaceRoot()})
	if err != nil {
		t.Fatal(err)
	}
	nonce := journal.NewNonce()
	if err := journal.Start(ctx, hd, journal.Spec{Paths: paths, Nonce: nonce, Agent: inv.Command}); err != nil {
		t.Fatal(err)
	}
	tr := h.Translator(run)
	evs := tr.Begin()
	rd := &journal.Reader{Handle: hd, Paths: paths, Nonce: nonce, FirstByteTimeout: 30 * time.Second}
	exit, err := rd.Read(ctx, 0, func(l journal.Line) error {
		if l.Diff == nil {
			evs = append(evs, tr.Line(l.Data)...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	evs = append(evs, tr.End(exit.Code)...)
	approvals, result := 0, ""
	for _, e := range evs {
		switch {
		case e.Type == event.Custom && e.Name == event.ApprovalRequested:
			approvals++
		case e.Type == event.ToolCallResult && e.ToolCallID == "call-1":
			result = strings.TrimSpace(e.Content)
		}
	}
	notes, err := os.ReadFile(filepath.Join(hd.WorkspaceRoot(), "notes.txt"))
	if err != nil {
		notes = []byte("(not written)")
	}
	return fmt.Sprintf("approvals: %d; command: %s; notes.txt: %s", approvals, result, strings.TrimSpace(string(notes)))
}
