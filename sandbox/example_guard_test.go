package sandbox_test

import (
	"context"
	"fmt"

	"github.com/d10ffeed/corral/sandbox"
)

// counting is a handle decorator: it embeds the handle it is given and
// exposes it with Unwrap so that As sees through it.
type counting struct {
	sandbox.Handle
	execs int
}

func (c *counting) Unwrap() sandbox.Handle { return c.Handle }

func (c *counting) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	c.execs++
	return c.Handle.Exec(ctx, cmd)
}

func ExampleGuard() {
	backend := newFake(sandbox.Capabilities{FS: true, Exec: true})
	p := sandbox.Guard(backend, sandbox.GuardOptions{
		Decorate: func(h sandbox.Handle) sandbox.Handle { return &counting{Handle: h} },
	})
	ctx := context.Background()
	h, _ := p.Create(ctx, sandbox.CreateOptions{ID: "sb-1"})

	// Refused by the guard; the backend is never called.
	_, err := h.Exec(ctx, sandbox.Command{Args: []string{"ls"}, Shell: "ls"})
	fmt.Println(sandbox.CodeOf(err), backend.rec.called("exec"))
	_, err = h.Snapshot(ctx, "before")
	fmt.Println(err)

	// Cut to OutputLimit even though the backend kept everything.
	backend.exec = func(context.Context, sandbox.Command) (*sandbox.ExecResult, error) {
		return &sandbox.ExecResult{Stdout: []byte("hello, world\n")}, nil
	}
	res, _ := h.Exec(ctx, sandbox.Command{Args: []string{"echo"}, OutputLimit: 5})
	fmt.Printf("%q %v, %d execs counted\n", res.Stdout, res.StdoutTruncated, h.(*counting).execs)
	// Output:
	// InvalidArgument false
	// fake.snapshot sb-1: sandbox provider "fake" does not support the "snapshots" capability
	// "hello" true, 2 execs counted
}

func ExampleAs() {
	p := sandbox.Guard(newFake(sandbox.Capabilities{FS: true, Exec: true}), sandbox.GuardOptions{
		Decorate: func(h sandbox.Handle) sandbox.Handle { return &counting{Handle: h} },
	})
	h, _ := p.Create(context.Background(), sandbox.CreateOptions{ID: "sb-1"})

	// A type assertion sees only the decorator ...
	_, ok := h.(*fakeHandle)
	fmt.Println(ok)
	// ... As walks the Unwrap chain to the backend's own handle.
	var fh *fakeHandle
	fmt.Println(sandbox.As(h, &fh), fh.Secret())
	// Output:
	// false
	// true backend-sb-1
}
