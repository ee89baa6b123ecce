package local_test

import (
	"testing"

	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
)

// wrapped is a handle decorator, as the daemon's metrics are.
type wrapped struct{ sandbox.Handle }

func (w *wrapped) Unwrap() sandbox.Handle { return w.Handle }

// TestConformanceGuarded: the guard (and a decorator outside it) keeps the
// conformance suite green: it refuses nothing a provider must do and
// changes no result the suite measures.
func TestConformanceGuarded(t *testing.T) {
	p := sandbox.Guard(newProvider(t, local.Options{}), sandbox.GuardOptions{
		Decorate: func(h sandbox.Handle) sandbox.Handle { return &wrapped{h} },
	})
	sandboxtest.Run(t, sandboxtest.Harness{Provider: p})
}
