package railway_test

import (
	"os"
	"testing"

	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/railway"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
)

// TestLive runs the provider and journal suites against the real Railway
// when a token (RAILWAY_API_TOKEN, or RAILWAY_TOKEN as a project token)
// and RAILWAY_ENVIRONMENT_ID are set (RAILWAY_GRAPHQL_ENDPOINT and
// RAILWAY_TCP_PROXY_WS_ENDPOINT are taken too). Without them it is a named
// skip, the one skip allowed under CI=true: no credentials exist on our
// machines.
func TestLive(t *testing.T) {
	env := os.Getenv(railway.EnvEnvironment)
	opts := railway.Options{EnvironmentID: env, Endpoint: os.Getenv(railway.EnvEndpoint), ExecEndpoint: os.Getenv(railway.EnvExecEndpoint)}
	if tok := os.Getenv(railway.EnvProjectToken); tok != "" { // the SDK's order
		opts.Token, opts.ProjectToken = tok, true
	} else {
		opts.Token = os.Getenv(railway.EnvAPIToken)
	}
	if opts.Token == "" || env == "" {
		t.Skip("live: RAILWAY_API_TOKEN (or RAILWAY_TOKEN) and RAILWAY_ENVIRONMENT_ID are not both set: the live Railway suite needs credentials")
	}
	p, err := railway.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("sandboxtest", func(t *testing.T) {
		sandboxtest.Run(t, sandboxtest.Harness{Provider: sandbox.Guard(p, sandbox.GuardOptions{})})
	})
	t.Run("journaltest", func(t *testing.T) { journaltest.Run(t, journaltest.Harness{Provider: p}) })
}
