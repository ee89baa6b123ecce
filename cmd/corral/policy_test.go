package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunWarnsOfUnenforcedPolicy: corral run says, before the agent's
// output, which rules of the policy the harness cannot enforce (the
// command harness sees none of a program's actions); without a policy it
// says nothing.
func TestRunWarnsOfUnenforcedPolicy(t *testing.T) {
	dir := t.TempDir()
	base := fmt.Sprintf("id: pol\nprovider:\n  name: local\n  local: {baseDir: %s}\n", filepath.Join(dir, "sandboxes"))
	env := []string{"XDG_STATE_HOME=" + dir}
	for _, c := range []struct {
		name, policy, want string
	}{
		{"deny rule", "policy:\n  commands: {deny: [\"rm *\"]}\n  default: allow\n",
			"corral: warning: the command harness cannot enforce these rules of the policy: commands.deny \"rm *\"\n" +
				"corral:   commands.deny \"rm *\": the command harness runs a program as given: corral sees none of its actions\n"},
		{"no policy", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := filepath.Join(t.TempDir(), "corral.yaml")
			if err := os.WriteFile(cfg, []byte(base+c.policy), 0o644); err != nil {
				t.Fatal(err)
			}
			out, errOut, code := cli(t, env, "run", "--config", cfg, "--store", "sqlite:"+filepath.Join(t.TempDir(), "s.db"), "--", "echo", "hi")
			if code != 0 || out != "hi\n" {
				t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			var warn strings.Builder
			for _, l := range strings.SplitAfter(errOut, "\n") {
				if strings.HasPrefix(l, "corral: warning") || strings.HasPrefix(l, "corral:   ") {
					warn.WriteString(l)
				}
			}
			if warn.String() != c.want {
				t.Errorf("stderr %q\nwant the warning %q", errOut, c.want)
			}
		})
	}
}
