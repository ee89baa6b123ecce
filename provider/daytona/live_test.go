package daytona_test

import (
	"os"
	"testing"

	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/daytona"
	"github.com/d10ffeed/corral/run/runtest"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
)

// TestLive runs the provider, journal and run suites against the real Daytona
// when DAYTONA_API_KEY is set (DAYTONA_API_URL when set names another
// control plane). Without the key it is a named skip, the one skip
// allowed under CI=true: no credentials exist on our machines.
func TestLive(t *testing.T) {
	key := os.Getenv("DAYTONA_API_KEY")
	if key == "" {
		t.Skip("live: DAYTONA_API_KEY is not set (and DAYTONA_API_URL for a control plane other than app.daytona.io): the live Daytona suite needs credentials")
	}
	p, err := daytona.New(daytona.Options{APIKey: key, APIURL: os.Getenv("DAYTONA_API_URL")})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("sandboxtest", func(t *testing.T) {
		sandboxtest.Run(t, sandboxtest.Harness{Provider: sandbox.Guard(p, sandbox.GuardOptions{})})
	})
	t.Run("journaltest", func(t *testing.T) { journaltest.Run(t, journaltest.Harness{Provider: p}) })
	t.Run("runtest", func(t *testing.T) { runtest.RunEach(t, p, runtest.EmbeddedStores()) })
}
