package main

import (
	"fmt"
	"testing"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/provider/vercel/vercelfake"
)

// TestVercelCrashTakeover runs `corral run --config corral.yaml -- sh -c
// …` with provider: vercel pointed at the Vercel fake, SIGKILLs the
// driving corral mid-run, and `corral attach` must deliver every line
// exactly once with the agent's exit code (crashTrial's checks).
func TestVercelCrashTakeover(t *testing.T) {
	const token = "vcl-cli-test-token-88bb"
	s, err := vercelfake.New(fakecloud.Options{BaseDir: t.TempDir(), Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	t.Setenv("VERCEL_TOKEN", token)
	t.Setenv("VERCEL_TEAM_ID", vercelfake.Team)
	t.Setenv("VERCEL_PROJECT_ID", vercelfake.Project)
	crashTrials(t, fmt.Sprintf("id: crash\nprovider:\n  name: vercel\n  vercel: {apiUrl: %s, runtime: node22}\n", s.APIURL()), 3)
	t.Logf("the fake served %d creates, %d gets, %d commands, %d log re-reads", s.Count("create"), s.Count("get"), s.Count("run"), s.Count("logs"))
}
