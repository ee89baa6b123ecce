package docker_test

import (
	"context"
	"testing"

	"github.com/moby/moby/client"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/docker"
	"github.com/d10ffeed/corral/sandbox"
)

// wrapped is a handle decorator such as the daemon's metrics: it embeds
// the handle and exposes it with Unwrap.
type wrapped struct{ sandbox.Handle }

func (w *wrapped) Unwrap() sandbox.Handle { return w.Handle }

// TestContainerIDThroughGuard: the container id is reachable from a
// handle that the guard and two decorators wrap, and from its fork, as the
// engine reports it for the container named by the handle's id.
func TestContainerIDThroughGuard(t *testing.T) {
	p := newProvider(t, docker.Options{})
	decorate := func(h sandbox.Handle) sandbox.Handle { return &wrapped{h} }
	g := sandbox.Guard(sandbox.Guard(p, sandbox.GuardOptions{Decorate: decorate}), sandbox.GuardOptions{Decorate: decorate})
	ctx := context.Background()
	h, err := g.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.DestroyAtEnd(t, h)
	cases := []struct {
		name string
		h    func(t *testing.T) sandbox.Handle
	}{
		{"guarded and decorated twice", func(*testing.T) sandbox.Handle { return h }},
		{"one more decorator outside the registry's", func(*testing.T) sandbox.Handle { return &wrapped{h} }},
		{"a fork of it", func(t *testing.T) sandbox.Handle {
			if !p.Capabilities().Fork {
				t.Skip("the provider does not fork")
			}
			f, err := h.Fork(ctx)
			if err != nil {
				t.Fatal(err)
			}
			testutil.DestroyAtEnd(t, f)
			return f
		}},
	}
	api := apiClient(t)
	found := 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hh := tc.h(t)
			if _, ok := hh.(*wrapped); !ok {
				t.Fatalf("the handle is %T, want the decorator outside", hh)
			}
			cid, ok := docker.ContainerID(hh)
			if !ok {
				t.Fatalf("ContainerID(%T) failed through the wrappers", hh)
			}
			res, err := api.ContainerInspect(ctx, hh.ID(), client.ContainerInspectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if cid != res.Container.ID {
				t.Errorf("ContainerID %s, the engine says %s is %s", cid, hh.ID(), res.Container.ID)
			}
			found++
		})
	}
	if _, ok := docker.ContainerID(&wrapped{}); ok {
		t.Error("ContainerID of a decorator around nothing succeeded")
	}
	if _, ok := docker.ContainerID(nil); ok {
		t.Error("ContainerID(nil) succeeded")
	}
	t.Logf("container id found through the wrappers for %d of %d handles", found, len(cases))
}
