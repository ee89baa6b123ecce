package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
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
	flags := []string{"--provider", "daytona", "--api-url", s.APIURL()}
	t.Setenv("DAYTONA_API_URL", "")
	t.Setenv("DAYTONA_API_KEY", "")
	_, errOut, code := corral(t, append([]string{"exec"}, append(flags, "--", "true")...)...)
	if code == 0 || !strings.Contains(errOut, "Daytona needs DAYTONA_API_KEY") {
		t.Fatalf("without a key: exit %d: %s", code, errOut)
	}
	t.Setenv("DAYTONA_API_KEY", key)
	out, errOut, code := corral(t, append([]string{"exec", "--keep"}, append(flags, "--", "sh", "-c", "echo from-daytona; exit 3")...)...)
	_, after, ok := strings.Cut(errOut, "sandbox kept: ")
	id, _, _ := strings.Cut(strings.TrimSpace(after), " ")
	if code != 3 || out != "from-daytona\n" || !ok {
		t.Fatalf("exec: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = corral(t, append([]string{"sandbox", "ls", "--json"}, flags...)...)
	var rows []struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].ID != id {
		t.Fatalf("ls: exit %d, %s %s (want [%s])", code, out, errOut, id)
	}
	out, errOut, code = corral(t, append([]string{"sandbox", "prune"}, flags...)...)
	left := s.Sandboxes("", nil)
	t.Logf("exec kept %s (key %q); prune: exit %d: %s%s; sandboxes left on the fake %d", id, rows[0].Key, code, out, errOut, len(left))
	if code != 0 || !strings.Contains(out+errOut, id) || len(left) != 1 || left[0].Name != "not-corral" {
		t.Fatalf("prune: exit %d: %s %s; left %d", code, out, errOut, len(left))
	}
}
