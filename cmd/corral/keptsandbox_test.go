package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// keptSandbox is one provider's corral exec --keep, sandbox ls and
// sandbox prune through the CLI, with the provider's flags.
type keptSandbox struct {
	name       string   // the provider, in the agent's output ("from-<name>")
	flags      []string // --provider and the flags pointing it at its backend
	keyEnv     string   // the variable that holds the API key
	key        string   // its value the backend accepts
	missingKey string   // what exec says without the key
}

// run checks that exec without the key fails naming it; that exec --keep
// with it runs a command (its output and exit code come back) and keeps
// the sandbox; that sandbox ls --json lists exactly that sandbox; and that
// prune names it. It returns the kept sandbox's id and listed key and
// prune's output, for the caller's checks on what the backend has left.
func (c keptSandbox) run(t *testing.T) (id, key, pruned string) {
	t.Helper()
	t.Setenv(c.keyEnv, "")
	_, errOut, code := corral(t, append([]string{"exec"}, append(c.flags, "--", "true")...)...)
	if code == 0 || !strings.Contains(errOut, c.missingKey) {
		t.Fatalf("without a key: exit %d: %s", code, errOut)
	}
	t.Setenv(c.keyEnv, c.key)
	word := "from-" + c.name
	out, errOut, code := corral(t, append([]string{"exec", "--keep"}, append(c.flags, "--", "sh", "-c", "echo "+word+"; exit 3")...)...)
	_, after, ok := strings.Cut(errOut, "sandbox kept: ")
	id, _, _ = strings.Cut(strings.TrimSpace(after), " ")
	if code != 3 || out != word+"\n" || !ok {
		t.Fatalf("exec: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = corral(t, append([]string{"sandbox", "ls", "--json"}, c.flags...)...)
	var rows []struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].ID != id {
		t.Fatalf("ls: exit %d, %s %s (want [%s])", code, out, errOut, id)
	}
	out, errOut, code = corral(t, append([]string{"sandbox", "prune"}, c.flags...)...)
	if code != 0 || !strings.Contains(out+errOut, id) {
		t.Fatalf("prune: exit %d: %s %s", code, out, errOut)
	}
	return id, rows[0].Key, out + errOut
}
