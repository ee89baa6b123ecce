package cloudflare_test

import (
	"os"
	"testing"

	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/cloudflare"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
)

// TestLive runs the provider and journal suites against a deployed bridge
// Worker when CORRAL_CLOUDFLARE_URL and CORRAL_CLOUDFLARE_TOKEN are set.
// Without them it is a named skip, the one skip allowed under CI=true: no
// Cloudflare account exists on our machines.
func TestLive(t *testing.T) {
	url, token := os.Getenv(cloudflare.EnvURL), os.Getenv(cloudflare.EnvToken)
	if url == "" || token == "" {
		t.Skip("live: " + cloudflare.EnvURL + " and " + cloudflare.EnvToken + " are not both set: the live Cloudflare suite needs a deployed bridge Worker (provider/cloudflare/bridge)")
	}
	p, err := cloudflare.New(cloudflare.Options{URL: url, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("sandboxtest", func(t *testing.T) {
		sandboxtest.Run(t, sandboxtest.Harness{Provider: sandbox.Guard(p, sandbox.GuardOptions{})})
	})
	t.Run("journaltest", func(t *testing.T) { journaltest.Run(t, journaltest.Harness{Provider: p}) })
}
