package sbxfake

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Build compiles the fake sbx program into dir and returns its path
// (dir/sbx). It needs the go tool (GOROOT's, else the one on PATH).
func Build(ctx context.Context, dir string) (string, error) {
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	out := filepath.Join(dir, "sbx")
	cmd := exec.CommandContext(ctx, gobin, "build", "-o", out, "github.com/d10ffeed/corral/provider/sbx/sbxfake/cmd/sbx")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the fake sbx: %v: %s", err, b)
	}
	return out, nil
}

// Calls returns the argument lists the fake was invoked with under the
// state directory state, oldest first (one per invocation).
func Calls(state string) ([][]string, error) {
	b, err := os.ReadFile(filepath.Join(state, callsLog))
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	var out [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var args []string
		if err := json.Unmarshal([]byte(line), &args); err != nil {
			return nil, err
		}
		out = append(out, args)
	}
	return out, nil
}

// Count returns how many invocations of verb (the first argument: "exec",
// "ls", "create", …) the fake served under state.
func Count(state, verb string) int {
	calls, _ := Calls(state)
	n := 0
	for _, c := range calls {
		if len(c) > 0 && c[0] == verb {
			n++
		}
	}
	return n
}

// Lookup returns the fake's record of the sandbox name under state.
func Lookup(state, name string) (Record, bool) {
	r, err := load(state, name)
	return r, err == nil
}

// SetLoggedOut makes every later host verb fail as the real CLI does
// without a login (true), or undoes it.
func SetLoggedOut(state string, out bool) error {
	p := filepath.Join(state, loggedOutFile)
	if !out {
		err := os.Remove(p)
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	if err := os.MkdirAll(state, 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, nil, 0o644)
}

// SetBanner makes the fake print a sandboxd banner line before its JSON
// (docker/sbx-releases#201), or stop doing so.
func SetBanner(state string, on bool) error {
	p := filepath.Join(state, bannerFile)
	if !on {
		err := os.Remove(p)
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	if err := os.MkdirAll(state, 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, nil, 0o644)
}
