package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
)

// TestGuardWrapsErrorsOnce: whatever the provider returns, the caller
// gets one *sandbox.Error with the operation and sandbox id in it once,
// and the code the cause carries.
func TestGuardWrapsErrorsOnce(t *testing.T) {
	already := sandbox.Errorf(sandbox.NotFound, "fake.exec", "sb-1", "gone")
	cases := []struct {
		name string
		// exec is what the fake's Exec does; cancel ends the caller's
		// context first.
		exec    func(cancel context.CancelFunc) error
		code    sandbox.Code
		msg     string
		same    error // when set, the error must be this very value
		errorIs error // when set, errors.Is must find it
	}{
		{"plain error", func(context.CancelFunc) error { return errors.New("boom") },
			sandbox.Unknown, "fake.exec sb-1: boom", nil, nil},
		{"*sandbox.Error passes unchanged", func(context.CancelFunc) error { return already },
			sandbox.NotFound, "fake.exec sb-1: gone", already, nil},
		{"*sandbox.Error under fmt.Errorf passes unchanged", func(context.CancelFunc) error { return fmt.Errorf("dial: %w", already) },
			sandbox.NotFound, "dial: fake.exec sb-1: gone", nil, already},
		{"a context error keeps its code", func(context.CancelFunc) error { return fmt.Errorf("read: %w", context.Canceled) },
			sandbox.Canceled, "fake.exec sb-1: read: context canceled", nil, context.Canceled},
		{"an ended context maps a code-less error", func(cancel context.CancelFunc) error { cancel(); return io.ErrUnexpectedEOF },
			sandbox.Canceled, "fake.exec sb-1: unexpected EOF", nil, io.ErrUnexpectedEOF},
		{"an unsupported-capability error gets op and id", func(context.CancelFunc) error { return sandbox.Unsupported("fake", "exec") },
			sandbox.Unimplemented, `fake.exec sb-1: sandbox provider "fake" does not support the "exec" capability`, nil, sandbox.Unimplemented},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, _, h := guarded(t, allCaps)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f.exec = func(context.Context, sandbox.Command) (*sandbox.ExecResult, error) { return nil, tc.exec(cancel) }
			_, err := h.Exec(ctx, sandbox.Command{Args: []string{"x"}})
			wantCode(t, tc.name, err, tc.code)
			if err == nil {
				return
			}
			if got := err.Error(); got != tc.msg {
				t.Errorf("message %q, want %q", got, tc.msg)
			}
			if n := strings.Count(err.Error(), "fake.exec"); n != 1 {
				t.Errorf("the operation appears %d times in %q, want once", n, err)
			}
			if tc.same != nil && err != tc.same {
				t.Errorf("got %#v, want the provider's own error value", err)
			}
			if tc.errorIs != nil && !errors.Is(err, tc.errorIs) {
				t.Errorf("errors.Is(%v, %v) is false", err, tc.errorIs)
			}
		})
	}
}

// TestGuardWrapsEveryOperation: each operation's error names the
// operation and the id it was about.
func TestGuardWrapsEveryOperation(t *testing.T) {
	bg := context.Background()
	boom := errors.New("boom")
	cases := []struct {
		name string
		call func(p sandbox.Provider, h sandbox.Handle) error
		msg  string
	}{
		{"create", func(p sandbox.Provider, _ sandbox.Handle) error {
			_, err := p.Create(bg, sandbox.CreateOptions{ID: "key-1"})
			return err
		}, "fake.create key-1: boom"},
		{"resume", func(p sandbox.Provider, _ sandbox.Handle) error { _, err := p.Resume(bg, "sb-9"); return err }, "fake.resume sb-9: boom"},
		{"restore-snapshot", func(p sandbox.Provider, _ sandbox.Handle) error {
			_, err := p.RestoreSnapshot(bg, "snap-1", sandbox.CreateOptions{})
			return err
		}, "fake.restore-snapshot snap-1: boom"},
		{"delete-snapshot", func(p sandbox.Provider, _ sandbox.Handle) error { return p.DeleteSnapshot(bg, "snap-1") }, "fake.delete-snapshot snap-1: boom"},
		{"destroy", func(p sandbox.Provider, _ sandbox.Handle) error { return p.Destroy(bg, "sb-9") }, "fake.destroy sb-9: boom"},
		{"handle destroy", func(_ sandbox.Provider, h sandbox.Handle) error { return h.Destroy(bg) }, "fake.destroy sb-1: boom"},
		{"set-env", func(_ sandbox.Provider, h sandbox.Handle) error { return h.SetEnv(bg, map[string]string{"A": "1"}) }, "fake.set-env sb-1: boom"},
		{"snapshot", func(_ sandbox.Provider, h sandbox.Handle) error { _, err := h.Snapshot(bg, "l"); return err }, "fake.snapshot sb-1: boom"},
		{"fork", func(_ sandbox.Provider, h sandbox.Handle) error { _, err := h.Fork(bg); return err }, "fake.fork sb-1: boom"},
		{"connect-port", func(_ sandbox.Provider, h sandbox.Handle) error { _, err := h.ConnectPort(bg, 80); return err }, "fake.connect-port sb-1: boom"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, g, h := guarded(t, allCaps)
			f.err = boom
			err := tc.call(g, h)
			if err == nil || err.Error() != tc.msg {
				t.Fatalf("got %v, want %q", err, tc.msg)
			}
			var se *sandbox.Error
			if !errors.As(err, &se) || se.Err != boom {
				t.Errorf("%#v is not one *sandbox.Error around the cause", err)
			}
		})
	}
	// A process's Wait error is wrapped too.
	_, _, h := guarded(t, allCaps)
	pr, err := h.Spawn(bg, sandbox.Command{Shell: "sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, err = pr.Wait(ctx)
	wantCode(t, "wait on an ended context", err, sandbox.Canceled)
	if err == nil || err.Error() != "fake.wait sb-1: context canceled" {
		t.Errorf("wait: got %v, want %q", err, "fake.wait sb-1: context canceled")
	}
}

// TestGuardNilResults: a provider that returns neither a value nor an
// error gets an Internal error, not a nil handed on.
func TestGuardNilResults(t *testing.T) {
	f := newFake(allCaps)
	f.nilHandle = true
	_, err := sandbox.Guard(f, sandbox.GuardOptions{}).Create(context.Background(), sandbox.CreateOptions{ID: "k"})
	wantCode(t, "create returning (nil, nil)", err, sandbox.Internal)

	f2, _, h := guarded(t, allCaps)
	f2.exec = func(context.Context, sandbox.Command) (*sandbox.ExecResult, error) { return nil, nil }
	_, err = h.Exec(context.Background(), sandbox.Command{Args: []string{"x"}})
	wantCode(t, "exec returning (nil, nil)", err, sandbox.Internal)
}

// decorator is a handle decorator as a daemon would write one: it embeds
// the handle, counts Execs and exposes the handle with Unwrap.
type decorator struct {
	sandbox.Handle
	name  string
	execs *atomic.Int64
}

func (d *decorator) Unwrap() sandbox.Handle { return d.Handle }

func (d *decorator) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	d.execs.Add(1)
	return d.Handle.Exec(ctx, cmd)
}

// outer is a second decorator type, so As can tell the layers apart.
type outer struct{ *decorator }

func (o *outer) Unwrap() sandbox.Handle { return o.decorator }

// TestGuardAsThroughDecorators: a handle guarded and decorated twice (by
// guarding a guarded provider) still yields every layer and the backend
// handle through As, and the provider through ProviderAs.
func TestGuardAsThroughDecorators(t *testing.T) {
	var innerExecs, outerExecs atomic.Int64
	f := newFake(allCaps)
	g := sandbox.Guard(f, sandbox.GuardOptions{Decorate: func(h sandbox.Handle) sandbox.Handle {
		return &decorator{Handle: h, name: "inner", execs: &innerExecs}
	}})
	g = sandbox.Guard(g, sandbox.GuardOptions{Decorate: func(h sandbox.Handle) sandbox.Handle {
		return &outer{&decorator{Handle: h, name: "outer", execs: &outerExecs}}
	}})
	h, err := g.Create(context.Background(), sandbox.CreateOptions{ID: "sb-7"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := h.(*outer); !ok {
		t.Fatalf("the outermost handle is %T, want *outer (the second decorator)", h)
	}
	var fh *fakeHandle
	if !sandbox.As(h, &fh) || fh.ID() != "sb-7" {
		t.Fatalf("As(*fakeHandle) = %v, %v; want the backend handle sb-7", fh, fh != nil)
	}
	var dec *decorator
	if !sandbox.As(h, &dec) || dec.name != "outer" {
		t.Errorf("As(*decorator) found %+v, want the outer layer's first", dec)
	}
	var secret interface{ Secret() string }
	if !sandbox.As(h, &secret) || secret.Secret() != "backend-sb-7" {
		t.Errorf("As(interface{Secret}) failed: %v", secret)
	}
	var other *fakeProcessHandle
	if sandbox.As(h, &other) {
		t.Error("As found a type that is not in the chain")
	}
	depth := 0
	for x := sandbox.Handle(h); ; depth++ {
		w, ok := x.(sandbox.HandleWrapper)
		if !ok {
			break
		}
		x = w.Unwrap()
	}
	if depth != 4 { // outer → its decorator → inner decorator → guard → fake
		t.Errorf("%d Unwrap hops from the handle to the fake, want 4 (one guard, two decorators)", depth)
	}
	if _, err := h.Exec(context.Background(), sandbox.Command{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if innerExecs.Load() != 1 || outerExecs.Load() != 1 {
		t.Errorf("execs seen by the decorators: inner %d, outer %d; want 1 and 1", innerExecs.Load(), outerExecs.Load())
	}
	var fp *fakeProvider
	if !sandbox.ProviderAs(g, &fp) || fp != f {
		t.Error("ProviderAs did not reach the fake provider through the guard")
	}
	if u := g.(sandbox.ProviderWrapper).Unwrap(); u != f {
		t.Errorf("the guard of a guard unwraps to %T, want the fake itself (one guard)", u)
	}
	t.Logf("As reached the backend handle through %d layers", depth)
}

// fakeProcessHandle is a Handle type that no chain holds.
type fakeProcessHandle struct{ sandbox.Handle }

// TestGuardForksGuardedAndDecorated: forks, and forks of forks, are
// guarded (the fake is not reached by a bad command) and decorated once.
func TestGuardForksGuardedAndDecorated(t *testing.T) {
	var decorated atomic.Int64
	f := newFake(allCaps)
	g := sandbox.Guard(f, sandbox.GuardOptions{Decorate: func(h sandbox.Handle) sandbox.Handle {
		decorated.Add(1)
		return &decorator{Handle: h, name: "d", execs: new(atomic.Int64)}
	}})
	ctx := context.Background()
	h, err := g.Create(ctx, sandbox.CreateOptions{ID: "sb-1"})
	if err != nil {
		t.Fatal(err)
	}
	fork, err := h.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fork2, err := fork.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		h  sandbox.Handle
		id string
	}{{fork, "sb-1-fork"}, {fork2, "sb-1-fork-fork"}} {
		d, ok := tc.h.(*decorator)
		if !ok {
			t.Fatalf("fork %s is %T, want the decorator outside", tc.id, tc.h)
		}
		if _, ok := d.Handle.(*fakeHandle); ok {
			t.Errorf("fork %s is decorated but not guarded", tc.id)
		}
		var fh *fakeHandle
		if !sandbox.As(tc.h, &fh) || fh.ID() != tc.id {
			t.Errorf("As on fork: %v, want %s", fh, tc.id)
		}
		before := f.rec.count()
		_, err := tc.h.Exec(ctx, sandbox.Command{})
		wantCode(t, "fork exec without command", err, sandbox.InvalidArgument)
		if f.rec.count() != before {
			t.Errorf("fork %s: a bad command reached the provider", tc.id)
		}
	}
	if n := decorated.Load(); n != 3 {
		t.Errorf("the decorator ran %d times, want 3 (create and two forks)", n)
	}
	t.Logf("decorated %d handles (create + 2 forks), each guarded", decorated.Load())
}

// TestGuardCloses: Close reaches a provider that holds resources.
func TestGuardCloses(t *testing.T) {
	c := &closingProvider{fakeProvider: newFake(allCaps)}
	g := sandbox.Guard(sandbox.Guard(c, sandbox.GuardOptions{}), sandbox.GuardOptions{})
	if err := g.(io.Closer).Close(); err != nil || c.closed != 1 {
		t.Errorf("Close: %v, closed %d times; want nil, 1", err, c.closed)
	}
	if sandbox.Guard(nil, sandbox.GuardOptions{}) != nil {
		t.Error("Guard(nil) is not nil")
	}
}

type closingProvider struct {
	*fakeProvider
	closed int
}

func (c *closingProvider) Close() error { c.closed++; return nil }

// TestAsRefusesBadTargets: like errors.As, a target that cannot hold a
// handle is a programming error and panics.
func TestAsRefusesBadTargets(t *testing.T) {
	_, _, h := guarded(t, allCaps)
	var notHandle *strings.Builder
	var nilPtr *(*fakeHandle)
	for _, tc := range []struct {
		name   string
		target any
	}{
		{"nil", nil},
		{"not a pointer", fakeHandle{}},
		{"nil pointer", nilPtr},
		{"pointer to a non-handle type", &notHandle},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("As(%T) did not panic", tc.target)
				}
			}()
			sandbox.As(h, tc.target)
		})
	}
}
