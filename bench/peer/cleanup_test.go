//go:build peerbench

package peer

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/local"
)

// destroySandboxesAtEnd destroys, at the test's end (passed or failed,
// after the daemon started next is stopped), every local sandbox the
// corral daemon made under sandboxes, as the daemon would: its processes
// get SIGTERM, then SIGKILL, and its directory goes. The warm keepers
// (Claude Code's, Codex's) run under setsid in their own sessions, outside
// the daemon's process group its stop kills, and would outlive the bench;
// they carry the sandbox's marker, so the destroy finds them. The test
// fails if a marked process is still alive after it.
func destroySandboxesAtEnd(t *testing.T, sandboxes string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p, err := local.New(local.Options{BaseDir: sandboxes})
		if err != nil {
			t.Errorf("cleaning up the sandboxes: %v", err)
			return
		}
		ents, _ := os.ReadDir(sandboxes)
		for _, e := range ents {
			if e.IsDir() {
				if err := p.Destroy(ctx, filepath.Join(sandboxes, e.Name())); err != nil {
					t.Errorf("destroying the bench's sandbox %s: %v", e.Name(), err)
				}
			}
		}
		if left := markedProcs(sandboxes); len(left) > 0 {
			t.Errorf("processes of the bench's sandboxes left after their destroy: %v", left)
		}
	})
}

// markedProcs lists the live processes that carry the local provider's
// marker of a sandbox under sandboxes.
func markedProcs(sandboxes string) []int {
	marker := []byte(local.SandboxIDEnv + "=" + filepath.Clean(sandboxes) + "/")
	var out []int
	for _, pr := range testutil.Procs() {
		if pr.State == "Z" {
			continue
		}
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pr.Pid) + "/environ")
		if err == nil && (bytes.HasPrefix(env, marker) || bytes.Contains(env, append([]byte{0}, marker...))) {
			out = append(out, pr.Pid)
		}
	}
	return out
}
