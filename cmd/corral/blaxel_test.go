package main

import (
	"fmt"
	"testing"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/provider/blaxel/blaxelfake"
)

// TestBlaxelCrashTakeover runs `corral run --config corral.yaml -- sh -c
// …` with provider: blaxel pointed at the Blaxel fake, SIGKILLs the
// driving corral mid-run, and `corral attach` must deliver every line
// exactly once with the agent's exit code (crashTrial's checks).
func TestBlaxelCrashTakeover(t *testing.T) {
	const key = "bl-cli-test-key-41d7"
	s, err := blaxelfake.New(fakecloud.Options{BaseDir: t.TempDir(), Token: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	t.Setenv("BL_API_KEY", key)
	t.Setenv("BL_WORKSPACE", blaxelfake.Workspace)
	crashTrials(t, fmt.Sprintf("id: crash\nprovider:\n  name: blaxel\n  blaxel: {apiUrl: %s, workdir: \"~/workspace\"}\n", s.APIURL()), 3)
	t.Logf("the fake served %d creates, %d gets, %d processes", s.Count("create"), s.Count("get"), s.Count("process"))
}
