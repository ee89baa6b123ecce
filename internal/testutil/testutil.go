// Package testutil holds helpers for corral's own tests: real git
// repositories on disk, and the rule that a missing backend skips on a
// developer machine but fails under CI=true.
package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// InCI reports whether the tests run in CI (CI=true), where a missing
// backend is a failure, never a skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// Unavailable skips the test with the reason, or fails it under CI=true.
func Unavailable(t testing.TB, reason string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s (CI=true: a missing backend is a failure)", reason)
	}
	t.Skip(reason)
}

// NeedGit skips (or fails in CI) when git is not installed.
func NeedGit(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		Unavailable(t, "git is not installed")
	}
}

// BareRepo makes a bare git repository with one commit holding files and
// returns its file:// URL.
func BareRepo(t testing.TB, files map[string]string) string {
	t.Helper()
	NeedGit(t)
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	bare := filepath.Join(dir, "repo.git")
	for name, content := range files {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, work, "init", "-q", "-b", "main")
	Git(t, work, "add", "-A")
	Git(t, work, "-c", "user.name=corral", "-c", "user.email=corral@example.invalid", "commit", "-q", "-m", "initial")
	Git(t, dir, "clone", "-q", "--bare", work, bare)
	return "file://" + bare
}

// Git runs git in dir and fails the test on error.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// DockerTestImage is the local image scripts/docker-test-image.sh builds.
const DockerTestImage = "corral-test-base"

// NeedDocker skips (or fails in CI) unless a Docker engine answers and the
// test image is present.
func NeedDocker(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		Unavailable(t, "docker: the docker CLI is not installed (scripts/test installs docker.io)")
	}
	if out, err := exec.Command("docker", "image", "inspect", "--format", "{{.Id}}", DockerTestImage).CombinedOutput(); err != nil {
		Unavailable(t, "docker: no engine or no image "+DockerTestImage+" (run scripts/test, or scripts/docker-test-image.sh): "+string(out))
	}
}

// AgentBin returns the path of an agent CLI (claude, codex, opencode)
// installed by scripts/setup-agents.sh under $CORRAL_AGENTS_DIR (default
// /opt/corral-agents), or skips the test naming the script (fails under
// CI=true).
func AgentBin(tb testing.TB, name string) string {
	tb.Helper()
	dir := os.Getenv("CORRAL_AGENTS_DIR")
	if dir == "" {
		dir = "/opt/corral-agents"
	}
	bin := filepath.Join(dir, "node_modules", ".bin", name)
	if _, err := os.Stat(bin); err != nil {
		Unavailable(tb, name+" is not installed at "+bin+": run scripts/setup-agents.sh")
	}
	return bin
}
