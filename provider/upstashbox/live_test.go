package upstashbox_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/upstashbox"
	"github.com/d10ffeed/corral/run/runtest"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/sqlitestore"
)

// TestLive runs the suites against the real Upstash Box when
// UPSTASH_BOX_API_KEY is set (UPSTASH_BOX_BASE_URL is honoured). Without
// the key it is a named skip, the one skip allowed under CI=true: no
// credentials exist on corral's machines.
func TestLive(t *testing.T) {
	key := os.Getenv(upstashbox.APIKeyEnv)
	if key == "" {
		t.Skip("TestLive: UPSTASH_BOX_API_KEY is not set; the live Upstash Box suite needs a real API key")
	}
	p, err := upstashbox.New(upstashbox.Options{APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("sandbox", func(t *testing.T) { sandboxtest.Run(t, sandboxtest.Harness{Provider: p, Port: 8080}) })
	t.Run("journal", func(t *testing.T) { journaltest.Run(t, journaltest.Harness{Provider: p}) })
	t.Run("run", func(t *testing.T) {
		runtest.Run(t, runtest.Harness{Provider: p, Store: func(t *testing.T) store.Store {
			st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "corral.db"), sqlitestore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return st
		}})
	})
}
