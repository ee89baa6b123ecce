package main

import (
	"fmt"
	"testing"

	"github.com/d10ffeed/corral/provider/railway/railwayfake"
)

// TestRailwayCrashTakeover runs `corral run --config corral.yaml -- sh -c
// …` with provider: railway pointed at the Railway fake (GraphQL and the
// exec socket), SIGKILLs the driving corral mid-run, and `corral attach`
// must deliver every line exactly once with the agent's exit code
// (crashTrial's checks).
func TestRailwayCrashTakeover(t *testing.T) {
	const token = "rw-cli-test-token-7e21"
	f, err := railwayfake.New(railwayfake.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	t.Setenv("RAILWAY_TOKEN", "")
	t.Setenv("RAILWAY_API_TOKEN", token)
	t.Setenv("RAILWAY_ENVIRONMENT_ID", f.EnvironmentID())
	crashTrials(t, fmt.Sprintf("id: crash\nprovider:\n  name: railway\n  railway: {endpoint: %s, execEndpoint: %s, workdir: \"~/workspace\"}\n", f.GraphQLURL(), f.ExecWSURL()), 3)
	t.Logf("the fake served %d GraphQL calls, %d exec sockets, %d files sockets; %d sandboxes left", f.Count("graphql"), f.Count("exec"), f.Count("files"), f.Live())
}
