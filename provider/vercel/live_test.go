package vercel_test

import (
	"os"
	"testing"

	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/vercel"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
)

// TestLive runs the provider and journal suites against the real Vercel
// Sandbox when VERCEL_TOKEN, VERCEL_TEAM_ID and VERCEL_PROJECT_ID are set
// (the token explicitly: a VERCEL_OIDC_TOKEN alone is not used). Without
// them it is a named skip, the one skip allowed under CI=true: no
// credentials exist on our machines.
func TestLive(t *testing.T) {
	token, team, project := os.Getenv("VERCEL_TOKEN"), os.Getenv("VERCEL_TEAM_ID"), os.Getenv("VERCEL_PROJECT_ID")
	if token == "" || team == "" || project == "" {
		t.Skip("live: VERCEL_TOKEN, VERCEL_TEAM_ID and VERCEL_PROJECT_ID are not all set: the live Vercel Sandbox suite needs credentials")
	}
	p, err := vercel.New(vercel.Options{Token: token, TeamID: team, ProjectID: project, APIURL: os.Getenv("VERCEL_SANDBOX_API_URL")})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("sandboxtest", func(t *testing.T) {
		sandboxtest.Run(t, sandboxtest.Harness{Provider: sandbox.Guard(p, sandbox.GuardOptions{})})
	})
	t.Run("journaltest", func(t *testing.T) { journaltest.Run(t, journaltest.Harness{Provider: p}) })
}
