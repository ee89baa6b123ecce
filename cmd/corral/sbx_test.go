package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/d10ffeed/corral/provider/sbx/sbxfake"
)

// TestSbxCrashTakeover runs `corral run --config corral.yaml -- sh -c …`
// with provider: sbx pointed at the fake sbx CLI, SIGKILLs the driving
// corral mid-run, and `corral attach` must deliver every line exactly
// once with the agent's exit code (crashTrial's checks).
func TestSbxCrashTakeover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := sbxfake.Build(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	t.Setenv(sbxfake.StateEnv, state)
	dir := t.TempDir()
	crashTrials(t, fmt.Sprintf("id: crash\nprovider:\n  name: sbx\n  sbx: {binary: %s, stateDir: %s}\n", bin, filepath.Join(dir, "sbx-state")), 3)
	t.Logf("the fake served %d creates, %d ls, %d execs, %d rm", sbxfake.Count(state, "create"), sbxfake.Count(state, "ls"),
		sbxfake.Count(state, "exec"), sbxfake.Count(state, "rm"))
}
