package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/provider/daytona/daytonafake"
)

// TestDaytonaCrashTakeover runs `corral run --config corral.yaml -- sh -c
// …` with provider: daytona pointed at the Daytona fake, SIGKILLs the
// driving corral mid-run, and `corral attach` must deliver every line
// exactly once with the agent's exit code (crashTrial's checks).
func TestDaytonaCrashTakeover(t *testing.T) {
	const key = "dtn-cli-test-key-77aa"
	s, err := daytonafake.New(fakecloud.Options{BaseDir: t.TempDir(), Token: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	t.Setenv("DAYTONA_API_KEY", key)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "corral.yaml")
	yaml := fmt.Sprintf("id: crash\nprovider:\n  name: daytona\n  daytona: {apiUrl: %s}\n", s.APIURL())
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		t.Run(fmt.Sprint("trial", i), func(t *testing.T) { crashTrial(t, cfg, i) })
	}
	t.Logf("the fake served %d creates, %d session commands, %d log streams", s.Count("create"), s.Count("sessionExec"), s.Count("logs"))
}
