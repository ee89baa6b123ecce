package main

import (
	"fmt"
	"testing"

	"github.com/d10ffeed/corral/provider/upstashbox/upstashboxfake"
)

// TestUpstashBoxCrashTakeover runs `corral run --config corral.yaml --
// sh -c …` with provider: upstashbox pointed at the Upstash Box fake,
// SIGKILLs the driving corral mid-run, and `corral attach` must deliver
// every line exactly once with the agent's exit code (crashTrial's
// checks). On Upstash a session's command dies with its socket, so this
// is what proves the journal wrapper runs detached: started through the
// HTTP exec, it outlives the killed corral and its sockets.
func TestUpstashBoxCrashTakeover(t *testing.T) {
	const key = "box-cli-test-key-31c9"
	f, err := upstashboxfake.New(upstashboxfake.Options{BaseDir: t.TempDir(), APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	t.Setenv("UPSTASH_BOX_API_KEY", key)
	crashTrials(t, fmt.Sprintf("id: crash\nprovider:\n  name: upstashbox\n  upstashbox: {baseUrl: %s, discoverWorkdir: true}\n", f.URL()), 3)
	t.Logf("the fake served %d creates, %d HTTP execs, %d sessions", f.Count("create"), f.Count("exec"), f.Count("session"))
}
