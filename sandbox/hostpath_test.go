package sandbox_test

import (
	"context"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
)

// hostHandle is a fake handle whose file system is the host's under root.
type hostHandle struct {
	sandbox.Handle
	root string
}

func (h hostHandle) HostPath(p string) (string, bool) { return h.root + p, true }

// decorated wraps a handle, as GuardOptions.Decorate does.
type decorated struct{ sandbox.Handle }

func (d decorated) Unwrap() sandbox.Handle { return d.Handle }

// TestHostPathThroughWrappers: HostPath reaches the backend handle through
// the guard and a decorator, and reports false for a handle without one.
func TestHostPathThroughWrappers(t *testing.T) {
	f := newFake(allCaps)
	for _, tc := range []struct {
		name string
		wrap func(sandbox.Handle) sandbox.Handle
		want string
		ok   bool
	}{
		{"no host path", func(h sandbox.Handle) sandbox.Handle { return h }, "", false},
		{"host path", func(h sandbox.Handle) sandbox.Handle { return hostHandle{h, "/host"} }, "/host/tmp/j", true},
		{"host path under a decorator", func(h sandbox.Handle) sandbox.Handle { return decorated{hostHandle{h, "/host"}} }, "/host/tmp/j", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := sandbox.Guard(f, sandbox.GuardOptions{Decorate: tc.wrap})
			h, err := g.Create(context.Background(), sandbox.CreateOptions{ID: "sb-1"})
			if err != nil {
				t.Fatal(err)
			}
			got, ok := sandbox.HostPath(h, "/tmp/j")
			if got != tc.want || ok != tc.ok {
				t.Errorf("HostPath = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	if _, ok := sandbox.HostPath(nil, "/tmp/j"); ok {
		t.Error("HostPath(nil) reported a host path")
	}
}
