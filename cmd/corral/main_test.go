package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
)

// corralBin is the CLI built once for the tests that run it as a process.
var corralBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "corral-cli-test")
	if err != nil {
		panic(err)
	}
	corralBin = filepath.Join(dir, "corral")
	if out, err := exec.Command("go", "build", "-o", corralBin, ".").CombinedOutput(); err != nil {
		panic("building corral: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// corral runs the CLI and returns stdout, stderr and the exit code.
func corral(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(corralBin, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestExecPassesOutputAndExitCode(t *testing.T) {
	out, errOut, code := corral(t, "exec", "--", "sh", "-c", "echo hi; echo err >&2; exit 3")
	if out != "hi\n" || errOut != "err\n" || code != 3 {
		t.Errorf("got stdout %q stderr %q exit %d; want \"hi\\n\", \"err\\n\", 3", out, errOut, code)
	}
}

func TestExecEnvAndKeep(t *testing.T) {
	out, errOut, code := corral(t, "exec", "--keep", "--env", "GREETING=hello there", "--", "sh", "-c", `echo "$GREETING"; pwd`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || lines[0] != "hello there" {
		t.Fatalf("stdout %q", out)
	}
	dir := lines[1]
	t.Cleanup(func() { os.RemoveAll(dir) })
	if !strings.Contains(errOut, "sandbox kept: "+dir) {
		t.Errorf("stderr %q does not name the kept sandbox %s", errOut, dir)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Errorf("kept sandbox dir: %v", err)
	}
}

func TestExecFixedDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "marker"), []byte("m"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := corral(t, "exec", "--dir", dir, "--", "cat", "marker")
	if out != "m" || code != 0 {
		t.Errorf("stdout %q exit %d stderr %q", out, code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "marker")); err != nil {
		t.Error("a fixed --dir must be kept")
	}
}

func TestBadInput(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no command", []string{"exec"}, "no command given"},
		{"unknown provider", []string{"exec", "--provider", "nope", "--", "true"}, `unknown provider "nope" (known: `},
		{"missing dir", []string{"exec", "--dir", "/no/such/dir", "--", "true"}, "not an existing directory"},
		{"bad env", []string{"exec", "--env", "NOVALUE", "--", "true"}, "want NAME=value"},
		{"unknown flag", []string{"exec", "--bogus", "--", "true"}, "unknown flag"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := corral(t, tt.args...)
			if code == 0 || !strings.Contains(errOut, tt.want) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want a non-zero exit and one line containing %q", code, out, errOut, tt.want)
			}
		})
	}
}

func TestProvidersJSON(t *testing.T) {
	out, errOut, code := corral(t, "providers", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []struct {
		Name         string          `json:"name"`
		Capabilities map[string]bool `json:"capabilities"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	found := false
	for _, r := range rows {
		if r.Name == "local" {
			found = true
			if !r.Capabilities["killableProcesses"] || r.Capabilities["snapshots"] {
				t.Errorf("local capabilities %v", r.Capabilities)
			}
			if len(r.Capabilities) != len(sandbox.CapabilityNames) {
				t.Errorf("want %d capability flags, got %d", len(sandbox.CapabilityNames), len(r.Capabilities))
			}
		}
	}
	if !found {
		t.Errorf("local missing from %s", out)
	}
}

func TestVersion(t *testing.T) {
	out, _, code := corral(t, "version")
	if code != 0 || !strings.HasPrefix(out, "corral ") {
		t.Errorf("version: %q exit %d", out, code)
	}
}
