package main

import (
	"fmt"
	"os"
	"path/filepath"
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
	dir := t.TempDir()
	cfg := filepath.Join(dir, "corral.yaml")
	yaml := fmt.Sprintf("id: crash\nprovider:\n  name: vercel\n  vercel: {apiUrl: %s, runtime: node22}\n", s.APIURL())
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		t.Run(fmt.Sprint("trial", i), func(t *testing.T) { crashTrial(t, cfg, i) })
	}
	t.Logf("the fake served %d creates, %d gets, %d commands, %d log re-reads", s.Count("create"), s.Count("get"), s.Count("run"), s.Count("logs"))
}
