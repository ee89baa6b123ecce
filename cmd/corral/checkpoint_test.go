package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckpointCommands: save a thread's workspace, list it, fork it into
// a new thread whose first run finds the files, and restore the first
// thread over a change; bad input says what is wrong.
func TestCheckpointCommands(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "corral.yaml")
	if err := os.WriteFile(cfg, []byte("provider:\n  name: local\n  local: {baseDir: "+filepath.Join(dir, "sandboxes")+"}\nlifecycle: {snapshot: none}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := []string{"--store", "sqlite:" + filepath.Join(dir, "corral.db"), "--config", cfg}
	cli := func(args ...string) (string, string, int) {
		t.Helper()
		for i, a := range args { // the flags go before a command's "--"
			if a == "--" {
				return corral(t, append(append(append([]string{}, args[:i]...), state...), args[i:]...)...)
			}
		}
		return corral(t, append(args, state...)...)
	}
	if _, errOut, code := cli("run", "--thread", "t", "--", "sh", "-c", "mkdir -p src && echo hello > src/a.txt"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	out, errOut, code := cli("checkpoint", "save", "t", "--label", "first")
	id := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(id, "ckpt-") {
		t.Fatalf("checkpoint save: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, _, code = cli("checkpoint", "ls", "t")
	if code != 0 || !strings.Contains(out, "* ") || !strings.Contains(out, id) || !strings.Contains(out, "first") || !strings.Contains(out, "named") {
		t.Fatalf("checkpoint ls: exit %d:\n%s", code, out)
	}
	out, _, code = cli("checkpoint", "ls", "t", "--json")
	var items []struct {
		ID   string `json:"id"`
		Head bool   `json:"head"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &items) != nil || len(items) != 1 || items[0].ID != id || !items[0].Head {
		t.Fatalf("checkpoint ls --json: exit %d: %s", code, out)
	}
	out, errOut, code = cli("checkpoint", "fork", "t", "--to", "t2")
	if code != 0 || strings.TrimSpace(out) != "t2" {
		t.Fatalf("checkpoint fork: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out, errOut, code = cli("run", "--thread", "t2", "--", "cat", "src/a.txt"); code != 0 || out != "hello\n" {
		t.Fatalf("the fork's first run: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, errOut, code = cli("run", "--thread", "t", "--", "sh", "-c", "echo changed > src/a.txt"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	if out, errOut, code = cli("checkpoint", "restore", "t"); code != 0 || !strings.Contains(out, "restored: 1 files") {
		t.Fatalf("checkpoint restore: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out, _, code = cli("run", "--thread", "t", "--", "cat", "src/a.txt"); code != 0 || out != "hello\n" {
		t.Fatalf("after restore: exit %d, stdout %q", code, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"checkpoint", "save", "nope"}, "the thread has no runs"},
		{[]string{"checkpoint", "fork", "nope"}, "no checkpoint to fork from"},
		{[]string{"checkpoint", "fork", "t", "--to", "t2"}, "not empty"},
		{[]string{"checkpoint", "restore", "t", "--checkpoint", "ckpt-nope"}, "ckpt-nope"},
	} {
		_, errOut, code := cli(tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want a failure saying %q", tc.args, code, errOut, tc.want)
		}
	}
}
