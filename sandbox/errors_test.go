package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
)

func TestCodeOf(t *testing.T) {
	wrapped := sandbox.Wrap(sandbox.Unavailable, "docker.ping", "", io.EOF)
	tests := []struct {
		name string
		err  error
		want sandbox.Code
	}{
		{"nil", nil, sandbox.OK},
		{"plain", errors.New("x"), sandbox.Unknown},
		{"coded", sandbox.Errorf(sandbox.NotFound, "op", "id", "gone"), sandbox.NotFound},
		{"wrapped by fmt", fmt.Errorf("outer: %w", sandbox.Errorf(sandbox.AlreadyExists, "op", "", "x")), sandbox.AlreadyExists},
		{"canceled", context.Canceled, sandbox.Canceled},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), sandbox.DeadlineExceeded},
		{"unsupported", sandbox.Unsupported("p", "fork"), sandbox.Unimplemented},
		{"wrap", wrapped, sandbox.Unavailable},
		{"wrap of context error", sandbox.Wrap(sandbox.Internal, "op", "", context.Canceled), sandbox.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sandbox.CodeOf(tt.err); got != tt.want {
				t.Errorf("CodeOf = %v, want %v", got, tt.want)
			}
			// A raw context error has a code but is not a corral error.
			raw := errors.Is(tt.err, context.Canceled) && tt.name != "wrap of context error" || tt.name == "deadline"
			if tt.want != sandbox.OK && tt.want != sandbox.Unknown && !raw && !errors.Is(tt.err, tt.want) {
				t.Errorf("errors.Is(err, %v) = false", tt.want)
			}
		})
	}
}

func TestWrapOnce(t *testing.T) {
	inner := sandbox.Errorf(sandbox.NotFound, "fs.read", "/workspace/a", "missing")
	if got := sandbox.Wrap(sandbox.Internal, "exec", "sb1", inner); got != inner {
		t.Errorf("Wrap of a coded error must return it unchanged, got %v", got)
	}
	if sandbox.Wrap(sandbox.Internal, "op", "", nil) != nil {
		t.Error("Wrap(nil) must be nil")
	}
	err := sandbox.Wrap(sandbox.Unavailable, "docker.ping", "unix:///var/run/docker.sock", io.EOF)
	if got, want := err.Error(), "docker.ping unix:///var/run/docker.sock: EOF"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if !errors.Is(err, io.EOF) {
		t.Error("the cause must stay reachable")
	}
}

func TestCodeNames(t *testing.T) {
	for c := sandbox.OK; c <= sandbox.Internal; c++ {
		got, ok := sandbox.ParseCode(c.String())
		if !ok || got != c {
			t.Errorf("ParseCode(%q) = %v, %v", c.String(), got, ok)
		}
	}
	if _, ok := sandbox.ParseCode("Bogus"); ok {
		t.Error("ParseCode accepted an unknown name")
	}
}

func TestUnsupportedMessage(t *testing.T) {
	err := sandbox.Unsupported("local", "snapshots")
	if got, want := err.Error(), `sandbox provider "local" does not support the "snapshots" capability`; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	var uce *sandbox.UnsupportedCapabilityError
	if !errors.As(err, &uce) || uce.Capability != "snapshots" {
		t.Error("errors.As must find the UnsupportedCapabilityError")
	}
}

func ExampleCodeOf() {
	err := sandbox.Errorf(sandbox.NotFound, "local.resume", "/tmp/sb-1", "sandbox is gone")
	fmt.Println(sandbox.CodeOf(err), errors.Is(err, sandbox.NotFound))
	fmt.Println(err)
	// Output:
	// NotFound true
	// local.resume /tmp/sb-1: sandbox is gone
}
