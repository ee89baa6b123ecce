package testutil

import (
	"context"
	"testing"

	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/sandbox"
)

// LocalSandbox creates a local-provider sandbox under a temporary
// directory, destroyed when the test ends.
func LocalSandbox(tb testing.TB) sandbox.Handle {
	tb.Helper()
	p, err := local.New(local.Options{BaseDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	h, err := p.Create(context.Background(), sandbox.CreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = h.Destroy(context.Background()) })
	return h
}
