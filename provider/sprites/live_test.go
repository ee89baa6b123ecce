package sprites_test

import (
	"os"
	"testing"

	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/sprites"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
)

// TestLive runs the provider and journal suites against the real Sprites
// API when SPRITES_API_KEY is set (SPRITES_API_URL when set names another
// API). Without the key it is a named skip, the one skip allowed under
// CI=true: no credentials exist on our machines.
func TestLive(t *testing.T) {
	key := os.Getenv("SPRITES_API_KEY")
	if key == "" {
		t.Skip("live: SPRITES_API_KEY is not set (and SPRITES_API_URL for an API other than api.sprites.dev): the live Sprites suite needs credentials")
	}
	p, err := sprites.New(sprites.Options{APIKey: key, APIURL: os.Getenv("SPRITES_API_URL")})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("sandboxtest", func(t *testing.T) {
		sandboxtest.Run(t, sandboxtest.Harness{Provider: sandbox.Guard(p, sandbox.GuardOptions{}), Port: 8080})
	})
	t.Run("journaltest", func(t *testing.T) { journaltest.Run(t, journaltest.Harness{Provider: p}) })
}
