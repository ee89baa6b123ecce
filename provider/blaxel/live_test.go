package blaxel_test

import (
	"os"
	"testing"

	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/blaxel"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
)

// TestLive runs the provider and journal suites against the real Blaxel
// when BL_API_KEY and BL_WORKSPACE are set (BL_REGION and BL_API_URL are
// taken too). Without them it is a named skip, the one skip allowed
// under CI=true: no credentials exist on our machines.
func TestLive(t *testing.T) {
	key, ws := os.Getenv("BL_API_KEY"), os.Getenv("BL_WORKSPACE")
	if key == "" || ws == "" {
		t.Skip("live: BL_API_KEY and BL_WORKSPACE are not both set: the live Blaxel suite needs credentials")
	}
	p, err := blaxel.New(blaxel.Options{APIKey: key, Workspace: ws, Region: os.Getenv("BL_REGION"), APIURL: os.Getenv("BL_API_URL")})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("sandboxtest", func(t *testing.T) {
		sandboxtest.Run(t, sandboxtest.Harness{Provider: sandbox.Guard(p, sandbox.GuardOptions{})})
	})
	t.Run("journaltest", func(t *testing.T) { journaltest.Run(t, journaltest.Harness{Provider: p}) })
}
