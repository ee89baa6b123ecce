package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSandboxCommandsLocal: corral sandbox works for the local provider
// through the registry: ls and rm over its base directory, and a clear
// error naming the provider and the operation for what it lacks (prune,
// listing snapshots, snapshot).
func TestSandboxCommandsLocal(t *testing.T) {
	base := t.TempDir()
	_, errOut, code := corral(t, "exec", "--base-dir", base, "--keep", "--", "true")
	if code != 0 {
		t.Fatalf("exec --keep: exit %d: %s", code, errOut)
	}
	_, after, ok := strings.Cut(errOut, "sandbox kept: ")
	id, _, _ := strings.Cut(after, " ")
	if !ok || !strings.HasPrefix(id, base) {
		t.Fatalf("no kept sandbox under %s in %q", base, errOut)
	}
	local := []string{"--provider", "local", "--base-dir", base}
	ls := func() []string {
		t.Helper()
		out, errOut, code := corral(t, append([]string{"sandbox", "ls", "--json"}, local...)...)
		if code != 0 {
			t.Fatalf("ls: exit %d: %s", code, errOut)
		}
		var rows []struct {
			ID    string `json:"id"`
			State string `json:"state"`
		}
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("%v in %s", err, out)
		}
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		return ids
	}
	if ids := ls(); len(ids) != 1 || ids[0] != id {
		t.Errorf("ls = %v, want [%s]", ids, id)
	}
	text, _, code := corral(t, append([]string{"sandbox", "ls"}, local...)...)
	if code != 0 || !strings.Contains(text, id) || !strings.Contains(text, "directory") {
		t.Errorf("ls text (exit %d):\n%s", code, text)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"sandbox", "prune"}, "the local provider does not implement pruning"},
		{[]string{"sandbox", "snapshots"}, "the local provider does not implement listing snapshots"},
		{[]string{"sandbox", "snapshot", id}, "snapshots"},
		{[]string{"sandbox", "ls", "--image", "x"}, `--image: these flags are for the blaxel or docker or kubernetes or qemu provider, not "local"`},
	} {
		out, errOut, code := corral(t, append(tc.args, local...)...)
		t.Logf("%s: exit %d: %s", strings.Join(tc.args[:2], " "), code, strings.TrimSpace(errOut))
		if code == 0 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want a failure saying %q", tc.args, code, out, errOut, tc.want)
		}
	}
	out, errOut, code := corral(t, append([]string{"sandbox", "rm", id}, local...)...)
	if code != 0 || strings.TrimSpace(out) != id {
		t.Fatalf("rm: exit %d, %q %q", code, out, errOut)
	}
	if ids := ls(); len(ids) != 0 {
		t.Errorf("after rm, ls = %v", ids)
	}
}
