package docker

import (
	"errors"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/d10ffeed/corral/sandbox"
)

// apiError maps an error from the Engine API client to corral's codes,
// once: an error that already carries a code is returned unchanged.
func (p *Provider) apiError(op, id string, err error) error {
	if err == nil {
		return nil
	}
	var coded interface{ ErrorCode() sandbox.Code }
	if errors.As(err, &coded) {
		return err
	}
	if c := sandbox.CodeOf(err); c == sandbox.Canceled || c == sandbox.DeadlineExceeded {
		return sandbox.Wrap(c, op, id, err)
	}
	if client.IsErrConnectionFailed(err) || isDialError(err) {
		return &sandbox.Error{Code: sandbox.Unavailable, Op: op, ID: id,
			Msg: "docker: no engine reachable at " + p.cli.DaemonHost(), Err: err}
	}
	code := sandbox.Internal
	switch {
	case cerrdefs.IsNotFound(err):
		code = sandbox.NotFound
	case cerrdefs.IsAlreadyExists(err):
		code = sandbox.AlreadyExists
	case cerrdefs.IsConflict(err), cerrdefs.IsFailedPrecondition(err):
		code = sandbox.FailedPrecondition
	case cerrdefs.IsInvalidArgument(err):
		code = sandbox.InvalidArgument
	case cerrdefs.IsPermissionDenied(err), cerrdefs.IsUnauthorized(err):
		code = sandbox.PermissionDenied
	case cerrdefs.IsUnavailable(err):
		code = sandbox.Unavailable
	case cerrdefs.IsResourceExhausted(err):
		code = sandbox.ResourceExhausted
	case cerrdefs.IsNotImplemented(err):
		code = sandbox.Unimplemented
	case cerrdefs.IsDeadlineExceeded(err):
		code = sandbox.DeadlineExceeded
	case cerrdefs.IsCanceled(err):
		code = sandbox.Canceled
	}
	return &sandbox.Error{Code: code, Op: op, ID: id, Err: err}
}

// isDialError recognises a failure to reach the daemon that the client
// does not classify itself (a hijacked connection dials on its own).
func isDialError(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "cannot connect to the Docker daemon") ||
		strings.Contains(msg, "Cannot connect to the Docker daemon")
}

// notRunning reports the daemon's "container is not running" conflict.
func notRunning(err error) bool {
	return err != nil && cerrdefs.IsConflict(err) && strings.Contains(strings.ToLower(err.Error()), "not running")
}
