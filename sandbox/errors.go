package sandbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Code classifies an error. The set is closed: every error corral returns
// carries exactly one of these codes, read with CodeOf. Codes are also
// errors themselves, so errors.Is(err, sandbox.NotFound) works.
type Code int

// The closed set of error codes. The numbers are stable; do not reorder.
const (
	// OK is the code of a nil error. No error carries it.
	OK Code = iota
	// Unknown is the code of an error that carries no code of its own.
	Unknown
	// NotFound: the sandbox, file, run or record does not exist (or is gone).
	NotFound
	// AlreadyExists: something with that name or id exists already.
	AlreadyExists
	// InvalidArgument: the caller's input is malformed, whatever the state.
	InvalidArgument
	// FailedPrecondition: the input is fine but the state does not allow it.
	FailedPrecondition
	// PermissionDenied: the operation is not allowed (a path leaving the
	// workspace through a symbolic link, a policy denial).
	PermissionDenied
	// Unimplemented: the provider or store does not support the operation.
	Unimplemented
	// Unavailable: the backend could not be reached; a retry may work.
	Unavailable
	// ResourceExhausted: a quota or limit was hit.
	ResourceExhausted
	// Canceled: the caller's context was cancelled.
	Canceled
	// DeadlineExceeded: the caller's deadline or a timeout expired.
	DeadlineExceeded
	// Internal: a bug or a broken invariant.
	Internal
)

var codeNames = [...]string{
	OK: "OK", Unknown: "Unknown", NotFound: "NotFound", AlreadyExists: "AlreadyExists",
	InvalidArgument: "InvalidArgument", FailedPrecondition: "FailedPrecondition",
	PermissionDenied: "PermissionDenied", Unimplemented: "Unimplemented",
	Unavailable: "Unavailable", ResourceExhausted: "ResourceExhausted",
	Canceled: "Canceled", DeadlineExceeded: "DeadlineExceeded", Internal: "Internal",
}

// String returns the code's name, e.g. "NotFound".
func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Error makes a Code usable as an errors.Is target.
func (c Code) Error() string { return c.String() }

// ParseCode returns the code with the given name (as printed by String).
func ParseCode(name string) (Code, bool) {
	for i, n := range codeNames {
		if n == name {
			return Code(i), true
		}
	}
	return Unknown, false
}

// Error is corral's error: a code, the operation that failed, the id of the
// thing it failed on, a message and an optional cause.
type Error struct {
	Code Code   // one of the closed set
	Op   string // the operation, e.g. "exec", "fs.read", "docker.create"
	ID   string // the sandbox, path or run the operation was about; may be empty
	Msg  string // what went wrong, for a person
	Err  error  // the cause; may be nil
}

// Error formats as "op id: msg: cause", leaving out empty parts.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Op != "" {
		b.WriteString(e.Op)
		if e.ID != "" {
			b.WriteString(" ")
			b.WriteString(e.ID)
		}
	}
	for _, part := range []string{e.Msg, errString(e.Err)} {
		if part == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(part)
	}
	if b.Len() == 0 {
		return e.Code.String()
	}
	return b.String()
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns the error's code.
func (e *Error) ErrorCode() Code { return e.Code }

// Is makes errors.Is(err, code) true for the error's own code.
func (e *Error) Is(target error) bool {
	c, ok := target.(Code)
	return ok && c == e.Code
}

// Errorf returns a new *Error with a formatted message and no cause.
func Errorf(code Code, op, id, format string, args ...any) error {
	return &Error{Code: code, Op: op, ID: id, Msg: fmt.Sprintf(format, args...)}
}

// Wrap attaches an operation and id to err, once. If err already carries a
// code (it is an *Error, or implements ErrorCode), it is returned unchanged so
// that errors are never wrapped twice; otherwise it is wrapped with code, or
// with the code of a context error when err is one. Wrap(nil) is nil.
func Wrap(code Code, op, id string, err error) error {
	if err == nil {
		return nil
	}
	var coded interface{ ErrorCode() Code }
	if errors.As(err, &coded) {
		return err
	}
	if c := contextCode(err); c != OK {
		code = c
	}
	return &Error{Code: code, Op: op, ID: id, Err: err}
}

// CodeOf returns the code of err: OK for nil, the code of the first error in
// the chain that carries one, Canceled or DeadlineExceeded for context
// errors, and Unknown otherwise.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var coded interface{ ErrorCode() Code }
	if errors.As(err, &coded) {
		return coded.ErrorCode()
	}
	if c := contextCode(err); c != OK {
		return c
	}
	return Unknown
}

func contextCode(err error) Code {
	switch {
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineExceeded
	}
	return OK
}

// UnsupportedCapabilityError is returned by an optional operation that the
// provider does not support. Its code is Unimplemented.
type UnsupportedCapabilityError struct {
	Provider   string // the provider's name
	Capability string // the capability flag (one of CapabilityNames) or operation
	Hint       string // optional advice
}

// Error formats the error for a person.
func (e *UnsupportedCapabilityError) Error() string {
	msg := fmt.Sprintf("sandbox provider %q does not support the %q capability", e.Provider, e.Capability)
	if e.Hint != "" {
		msg += ": " + e.Hint
	}
	return msg
}

// ErrorCode returns Unimplemented.
func (e *UnsupportedCapabilityError) ErrorCode() Code { return Unimplemented }

// Is makes errors.Is(err, Unimplemented) true.
func (e *UnsupportedCapabilityError) Is(target error) bool { return target == Unimplemented }

// Unsupported returns an UnsupportedCapabilityError.
func Unsupported(provider, capability string) error {
	return &UnsupportedCapabilityError{Provider: provider, Capability: capability}
}
