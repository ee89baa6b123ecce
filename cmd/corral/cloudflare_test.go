package main

import (
	"fmt"
	"testing"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/provider/cloudflare/cloudflarefake"
)

// TestCloudflareCrashTakeover runs `corral run --config corral.yaml -- sh
// -c …` with provider: cloudflare pointed at the fake bridge Worker,
// SIGKILLs the driving corral mid-run, and `corral attach` must deliver
// every line exactly once with the agent's exit code (crashTrial's checks).
func TestCloudflareCrashTakeover(t *testing.T) {
	const token = "cf-cli-test-token-41e7"
	s, err := cloudflarefake.New(fakecloud.Options{BaseDir: t.TempDir(), Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	t.Setenv("CF_BRIDGE_TEST_TOKEN", token)
	crashTrials(t, fmt.Sprintf("id: crash\nprovider:\n  name: cloudflare\n  cloudflare: {url: %s, tokenEnv: CF_BRIDGE_TEST_TOKEN}\n", s.URL()), 3)
	t.Logf("the fake bridge served %d creates, %d gets, %d exec sockets, %d env calls", s.Count("create"), s.Count("get"), s.Count("exec"), s.Count("env"))
}
