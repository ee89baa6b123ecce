package bootstrap_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/bootstrap"
)

func newHandle(t *testing.T) sandbox.Handle { return testutil.LocalSandbox(t) }

func read(t *testing.T, h sandbox.Handle, name string) string {
	t.Helper()
	b, err := h.FS().ReadFile(context.Background(), name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return string(b)
}

func TestSetupSerialStateCarriesOver(t *testing.T) {
	h := newHandle(t)
	ws := &sandbox.Workspace{Setup: []sandbox.SetupStep{
		{Run: "mkdir -p sub && cd sub"},
		{Run: "export GREETING='hello world'"},
		{Run: `printf '%s' "$GREETING" > serial.txt`},
		{Parallel: []string{`printf '%s' "$GREETING" > p1.txt`, `pwd > p2.txt`}},
		{Run: "set -- clobbered; echo after > after.txt"},
		{Run: "echo last > last.txt"},
	}}
	var mu sync.Mutex
	var events []bootstrap.StepEvent
	res, err := bootstrap.Run(context.Background(), h, ws, bootstrap.Options{OnStep: func(ev bootstrap.StepEvent) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if res.StepsRun != 7 {
		t.Errorf("StepsRun = %d, want 7", res.StepsRun)
	}
	if got := read(t, h, "sub/serial.txt"); got != "hello world" {
		t.Errorf("serial.txt = %q", got)
	}
	if got := read(t, h, "sub/p1.txt"); got != "hello world" {
		t.Errorf("a parallel group must inherit the shell's env: %q", got)
	}
	if got := strings.TrimSpace(read(t, h, "sub/p2.txt")); got != filepath.Join(h.WorkspaceRoot(), "sub") {
		t.Errorf("a parallel group must start in the shell's directory: %q", got)
	}
	if got := read(t, h, "sub/last.txt"); got != "last\n" {
		t.Errorf("a step that changes the positional parameters must not change the plan: %q", got)
	}
	if len(events) != 14 {
		t.Errorf("got %d step events, want 14 (start and end of 7 commands): %+v", len(events), events)
	}
}

func TestSetupParallelRunsConcurrently(t *testing.T) {
	h := newHandle(t)
	// Each command waits for the other's file: serial execution would hang.
	ws := &sandbox.Workspace{Setup: []sandbox.SetupStep{{Parallel: []string{
		"touch a; i=0; while [ ! -e b ]; do sleep 0.05; i=$((i+1)); [ $i -gt 200 ] && exit 9; done; true",
		"touch b; i=0; while [ ! -e a ]; do sleep 0.05; i=$((i+1)); [ $i -gt 200 ] && exit 9; done; true",
	}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := bootstrap.Run(ctx, h, ws, bootstrap.Options{}); err != nil {
		t.Fatal(err)
	}
}

func TestSetupFailure(t *testing.T) {
	secrets, err := sandbox.NewSecrets(map[string]string{"API_TOKEN": "canary-s3cr3t-value"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, cmd string
		code      int
		output    string
	}{
		{"exit code and tail", `echo "some output"; echo "token is $API_TOKEN" >&2; exit 3`, 3, "token is [secret:API_TOKEN]"},
		{"step exits the shell", "echo bye; exit 5", 5, "bye"},
		{"parallel failure", "", 4, "p-fail"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHandle(t)
			steps := []sandbox.SetupStep{{Run: "true"}, {Run: tt.cmd}, {Run: "touch never"}}
			if tt.cmd == "" {
				steps[1] = sandbox.SetupStep{Parallel: []string{"true", "echo p-fail; exit 4"}}
			}
			_, err := bootstrap.Run(context.Background(), h, &sandbox.Workspace{Setup: steps, Secrets: secrets}, bootstrap.Options{})
			se, ok := bootstrap.AsSetupError(err)
			if !ok {
				t.Fatalf("got %v, want a SetupError", err)
			}
			if se.ExitCode != tt.code || !strings.Contains(se.Output, tt.output) {
				t.Errorf("SetupError %+v; want exit %d and output containing %q", se, tt.code, tt.output)
			}
			if strings.Contains(err.Error(), "canary-s3cr3t-value") {
				t.Error("the secret value leaked into the error")
			}
			if sandbox.CodeOf(err) != sandbox.FailedPrecondition {
				t.Errorf("code %v", sandbox.CodeOf(err))
			}
			if ok, _ := h.FS().Exists(context.Background(), "never"); ok {
				t.Error("a step after the failure ran")
			}
		})
	}
}

func TestAgentsAndSkills(t *testing.T) {
	h := newHandle(t)
	ws := &sandbox.Workspace{
		Instructions: "Be careful.\n\n",
		Scripts:      map[string]string{"test": "go test ./...", "build": "go build ./..."},
		Skills: []sandbox.Skill{
			{Path: "docs/guide.md", Content: "guide"},
			{Path: "AGENTS.md", Content: "ignored: instructions win"},
		},
	}
	if _, err := bootstrap.Run(context.Background(), h, ws, bootstrap.Options{}); err != nil {
		t.Fatal(err)
	}
	want := "Be careful.\n\n## Workspace scripts\n\n- `build` → `go build ./...`\n- `test` → `go test ./...`\n"
	if got := read(t, h, "AGENTS.md"); got != want {
		t.Errorf("AGENTS.md = %q, want %q", got, want)
	}
	for _, n := range []string{"CLAUDE.md", "GEMINI.md"} {
		fi, err := h.FS().Lstat(context.Background(), n)
		if err != nil || fi.Type != sandbox.TypeSymlink {
			t.Errorf("%s: %+v %v; want a link to AGENTS.md", n, fi, err)
		}
		if got := read(t, h, n); got != want {
			t.Errorf("%s reads %q", n, got)
		}
	}
	if got := read(t, h, "docs/guide.md"); got != "guide" {
		t.Errorf("file skill = %q", got)
	}
}

func TestGitSourceInSandboxAndOnHost(t *testing.T) {
	testutil.NeedGit(t)
	repo := testutil.BareRepo(t, map[string]string{"README.md": "hello from git\n", "skills/a/SKILL.md": "skill a"})
	for _, where := range []string{"sandbox", "host"} {
		t.Run(where, func(t *testing.T) {
			ctx := context.Background()
			ws := &sandbox.Workspace{Source: &sandbox.Source{Git: repo, CloneOn: where}}
			prep, err := bootstrap.Prepare(ctx, ws)
			if err != nil {
				t.Fatal(err)
			}
			defer prep.Cleanup()
			p, err := local.New(local.Options{BaseDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			h, err := p.Create(ctx, sandbox.CreateOptions{SourceDir: prep.SourceDir})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Destroy(ctx)
			res, err := bootstrap.Run(ctx, h, ws, bootstrap.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Cloned != (where == "sandbox") {
				t.Errorf("Cloned = %v", res.Cloned)
			}
			if got := read(t, h, "README.md"); got != "hello from git\n" {
				t.Errorf("README.md = %q", got)
			}
			out, err := h.Exec(ctx, sandbox.Command{Args: []string{"git", "rev-list", "--count", "HEAD"}})
			if err != nil || strings.TrimSpace(string(out.Stdout)) != "1" {
				t.Errorf("shallow clone: %q %v", out.Stdout, err)
			}
			// A second bootstrap skips the clone: the root holds a repository.
			res, err = bootstrap.Run(ctx, h, ws, bootstrap.Options{})
			if err != nil || res.Cloned {
				t.Errorf("second run: cloned=%v err=%v", res.Cloned, err)
			}
		})
	}
}

func TestGitSkills(t *testing.T) {
	testutil.NeedGit(t)
	repo := testutil.BareRepo(t, map[string]string{"pack/one/SKILL.md": "one", "pack/two/skill.md": "two", "README.md": "r"})
	h := newHandle(t)
	ws := &sandbox.Workspace{Skills: []sandbox.Skill{{Git: repo}}}
	res, err := bootstrap.Run(context.Background(), h, ws, bootstrap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimSuffix(filepath.Base(repo), ".git")
	want := []string{"/workspace/.corral/skills/" + name + "/pack/one", "/workspace/.corral/skills/" + name + "/pack/two"}
	if strings.Join(res.Skills, ",") != strings.Join(want, ",") {
		t.Errorf("skills = %v, want %v", res.Skills, want)
	}
}

func TestCloneTokenNeverInArgv(t *testing.T) {
	testutil.NeedGit(t)
	// A fake git on PATH records its argv and environment.
	bin := t.TempDir()
	log := filepath.Join(bin, "log")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + log + "\nenv >> " + log + ".env\nmkdir -p \"$(eval echo \\${$#})\"\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	secrets, _ := sandbox.NewSecrets(map[string]string{"GH": "tok-canary-123"})
	h := newHandle(t)
	ws := &sandbox.Workspace{Source: &sandbox.Source{Git: "https://example.invalid/x/y.git", TokenSecret: "GH", Ref: "main"}, Secrets: secrets}
	if _, err := bootstrap.Run(context.Background(), h, ws, bootstrap.Options{}); err != nil {
		t.Fatal(err)
	}
	argv, _ := os.ReadFile(log)
	env, _ := os.ReadFile(log + ".env")
	if strings.Contains(string(argv), "tok-canary-123") {
		t.Errorf("the token is in git's argv:\n%s", argv)
	}
	if !strings.Contains(string(env), "CORRAL_GIT_TOKEN=tok-canary-123") {
		t.Error("the token must reach git through the environment")
	}
	if !strings.Contains(string(argv), "--\nhttps://example.invalid/x/y.git\n") {
		t.Errorf("the URL must follow --:\n%s", argv)
	}
	for _, bad := range []string{"--upload-pack=evil", "-x"} {
		ws := &sandbox.Workspace{Source: &sandbox.Source{Git: "https://x/y.git", Ref: bad}}
		if _, err := bootstrap.Run(context.Background(), h, ws, bootstrap.Options{}); sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Errorf("ref %q: %v, want InvalidArgument", bad, err)
		}
	}
	_ = exec.Command
}

func TestDetectPackageManager(t *testing.T) {
	h := newHandle(t)
	ctx := context.Background()
	if pm := bootstrap.DetectPackageManager(ctx, h.FS()); pm != "" {
		t.Errorf("empty workspace: %q", pm)
	}
	_ = h.FS().WriteFile(ctx, "package-lock.json", []byte("{}"))
	if pm := bootstrap.DetectPackageManager(ctx, h.FS()); pm != "npm" {
		t.Errorf("got %q, want npm", pm)
	}
	_ = h.FS().WriteFile(ctx, "pnpm-lock.yaml", nil)
	if pm := bootstrap.DetectPackageManager(ctx, h.FS()); pm != "pnpm" {
		t.Errorf("got %q, want pnpm (first in order)", pm)
	}
}
