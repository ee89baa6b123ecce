package main

import (
	"fmt"
	"net/http"
	"strings"
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
	crashTrials(t, fmt.Sprintf("id: crash\nprovider:\n  name: daytona\n  daytona: {apiUrl: %s}\n", s.APIURL()), 3)
	t.Logf("the fake served %d creates, %d session commands, %d log streams", s.Count("create"), s.Count("sessionExec"), s.Count("logs"))
}

// TestDaytonaSandboxCommands is TestE2BSandboxCommands on provider
// daytona: corral exec --provider daytona with --api-url pointed at the
// fake runs a command and keeps the sandbox; corral sandbox ls lists it
// (by label corral=1, not another client's), and prune removes it; a
// missing key names DAYTONA_API_KEY.
func TestDaytonaSandboxCommands(t *testing.T) {
	const key = "dtn-cli-test-key-3c4d"
	s, err := daytonafake.New(fakecloud.Options{BaseDir: t.TempDir(), Token: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	// another client's sandbox, made through the API without corral's label
	req, _ := http.NewRequest(http.MethodPost, s.APIURL()+"/sandbox", strings.NewReader(`{"name":"not-corral","labels":{"team":"other"}}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("making another client's sandbox: %v %v", err, resp)
	}
	_ = resp.Body.Close()
	t.Setenv("DAYTONA_API_URL", "")
	id, listed, pruned := keptSandbox{name: "daytona", keyEnv: "DAYTONA_API_KEY", key: key, missingKey: "Daytona needs DAYTONA_API_KEY",
		flags: []string{"--provider", "daytona", "--api-url", s.APIURL()}}.run(t)
	left := s.Sandboxes("", nil)
	t.Logf("exec kept %s (key %q); prune: %s; sandboxes left on the fake %d", id, listed, pruned, len(left))
	if len(left) != 1 || left[0].Name != "not-corral" {
		t.Fatalf("prune left %d sandboxes, want only another client's not-corral", len(left))
	}
}
