package main

import (
	"fmt"
	"testing"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/provider/sprites/spritesfake"
)

// TestSpritesCrashTakeover runs `corral run --config corral.yaml -- sh -c
// …` with provider: sprites pointed at the Sprites fake, SIGKILLs the
// driving corral mid-run, and `corral attach` must deliver every line
// exactly once with the agent's exit code (crashTrial's checks). The run's
// journal wrapper is a spawned session with max_run_after_disconnect=0, so
// it outlives the socket of the corral process that started it.
func TestSpritesCrashTakeover(t *testing.T) {
	const key = "corral-org/1/tok-cli/secret-77aa"
	s, err := spritesfake.New(spritesfake.Options{Options: fakecloud.Options{BaseDir: t.TempDir(), Token: key}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	t.Setenv("SPRITES_API_KEY", key)
	crashTrials(t, fmt.Sprintf("id: crash\nprovider:\n  name: sprites\n  sprites: {apiUrl: %s}\n", s.APIURL()), 3)
	t.Logf("the fake served %d creates, %d exec sockets, %d kills", s.Count("create"), s.Count("exec"), s.Count("kill"))
}
