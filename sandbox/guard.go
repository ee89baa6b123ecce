package sandbox

import (
	"context"
	"errors"
	"io"
	"syscall"
	"time"
)

// GuardOptions tune Guard.
type GuardOptions struct {
	// Decorate, when set, is applied to every handle the guard hands out
	// (from Create, Resume, RestoreSnapshot and Fork, at any depth), outside
	// the guard: the caller gets Decorate(guarded handle). A decorator adds
	// what the guard does not (metrics, logging); it should embed the handle
	// it is given, expose it with an Unwrap() Handle method (HandleWrapper)
	// so that As sees through it, and let Fork delegate to the handle it
	// wraps: the guard guards and decorates the fork itself. A nil result
	// keeps the guarded handle.
	Decorate func(Handle) Handle
}

// Guard returns p wrapped so that every handle it makes is guarded: the
// chores every provider would otherwise repeat are done once, before the
// provider is called.
//
//   - Exec and Spawn: Command.Validate (argv or shell, env names, Dir), and
//     Spawn refuses Command.Stdin; SetEnv checks the variable names, and
//     Create and RestoreSnapshot the names of CreateOptions.Env. Refusals
//     are InvalidArgument and the provider is not called.
//   - Command.Timeout: Exec runs under a context deadline of that length
//     (so the error is DeadlineExceeded); a spawned process runs under a
//     context that the guard cancels once Timeout has passed since Spawn
//     returned, which kills it on providers with KillableProcesses, as
//     cancelling the spawn context does. The provider still sees Timeout
//     (it may hand it to its backend as a server-side bound) but need not
//     enforce it.
//   - Command.OutputLimit: Exec's result is cut to the limit, with the
//     Truncated flag set, even when the provider kept more. Providers should
//     still bound their buffers: the guard cannot bound memory it does not
//     hold.
//   - Capabilities: Snapshot, Fork and ConnectPort on a handle, and
//     RestoreSnapshot and DeleteSnapshot on the provider, return an
//     UnsupportedCapabilityError (wrapped, code Unimplemented) without
//     calling the provider when Capabilities() lacks the flag. ConnectPort
//     refuses a port outside 1..65535.
//   - A context that has already ended fails Create, Resume,
//     RestoreSnapshot, Exec, Spawn, ConnectPort, Snapshot and Fork before
//     the provider is called (Destroy, DeleteSnapshot and SetEnv still run:
//     cleanup often runs on a cancelled context).
//   - Errors are wrapped exactly once, with the operation as
//     "<provider>.<op>" and the sandbox id (for Create the requested id, for
//     the snapshot operations the snapshot id): an error that is, or wraps,
//     an *Error passes unchanged; any other becomes an *Error with the code
//     CodeOf gives it, or Canceled or DeadlineExceeded when it carries no
//     code and the call's context has ended. Process.Wait and Process.Kill
//     errors of a spawned process are wrapped the same way.
//   - A provider that returns neither a result nor an error gets an Internal
//     error instead of handing nil to the caller.
//
// The file system (Handle.FS) passes through unguarded: every FS call
// already goes through CleanPath in the provider, and its errors carry the
// path as their id.
//
// Guarding a guarded provider does not wrap twice: Guard(Guard(p, a), b)
// is one guard over p whose decorator composes the two, b outside a, so a
// handle reads b(a(guarded)). Only the outermost value is checked: a guard
// under some other wrapper is not found.
//
// The result implements ProviderWrapper (Unwrap returns p) and io.Closer
// (Close closes p when p is an io.Closer). Use ProviderAs and As to reach
// the provider's and its handles' own types and optional interfaces
// through the guard.
func Guard(p Provider, opts GuardOptions) Provider {
	if p == nil {
		return nil
	}
	if g, ok := p.(*guardedProvider); ok {
		return &guardedProvider{p: g.p, decorate: composeDecorators(g.decorate, opts.Decorate)}
	}
	return &guardedProvider{p: p, decorate: opts.Decorate}
}

// composeDecorators returns outer after inner; either may be nil.
func composeDecorators(inner, outer func(Handle) Handle) func(Handle) Handle {
	switch {
	case inner == nil:
		return outer
	case outer == nil:
		return inner
	}
	return func(h Handle) Handle {
		if d := inner(h); d != nil {
			h = d
		}
		return outer(h)
	}
}

// guardedProvider is the Provider Guard returns.
type guardedProvider struct {
	p        Provider
	decorate func(Handle) Handle
}

var (
	_ Provider        = (*guardedProvider)(nil)
	_ ProviderWrapper = (*guardedProvider)(nil)
	_ io.Closer       = (*guardedProvider)(nil)
)

// Unwrap returns the provider the guard wraps.
func (g *guardedProvider) Unwrap() Provider { return g.p }

// Close closes the wrapped provider when it holds resources.
func (g *guardedProvider) Close() error {
	if c, ok := g.p.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func (g *guardedProvider) Name() string               { return g.p.Name() }
func (g *guardedProvider) Capabilities() Capabilities { return g.p.Capabilities() }

func (g *guardedProvider) Create(ctx context.Context, opts CreateOptions) (Handle, error) {
	const op = "create"
	if err := createChecks(ctx, opts); err != nil {
		return nil, g.fail(ctx, op, opts.ID, err)
	}
	h, err := g.p.Create(ctx, opts)
	return g.handOut(ctx, op, opts.ID, h, err)
}

func (g *guardedProvider) Resume(ctx context.Context, id string) (Handle, error) {
	const op = "resume"
	if err := ctx.Err(); err != nil {
		return nil, g.fail(ctx, op, id, err)
	}
	h, err := g.p.Resume(ctx, id)
	return g.handOut(ctx, op, id, h, err)
}

func (g *guardedProvider) RestoreSnapshot(ctx context.Context, snapshot string, opts CreateOptions) (Handle, error) {
	const op = "restore-snapshot"
	if !g.p.Capabilities().Snapshots {
		return nil, g.fail(ctx, op, snapshot, Unsupported(g.p.Name(), "snapshots"))
	}
	if err := createChecks(ctx, opts); err != nil {
		return nil, g.fail(ctx, op, snapshot, err)
	}
	h, err := g.p.RestoreSnapshot(ctx, snapshot, opts)
	return g.handOut(ctx, op, snapshot, h, err)
}

func (g *guardedProvider) DeleteSnapshot(ctx context.Context, snapshot string) error {
	const op = "delete-snapshot"
	if !g.p.Capabilities().Snapshots {
		return g.fail(ctx, op, snapshot, Unsupported(g.p.Name(), "snapshots"))
	}
	return g.fail(ctx, op, snapshot, g.p.DeleteSnapshot(ctx, snapshot))
}

func (g *guardedProvider) Destroy(ctx context.Context, id string) error {
	return g.fail(ctx, "destroy", id, g.p.Destroy(ctx, id))
}

// createChecks are the checks of Create and RestoreSnapshot.
func createChecks(ctx context.Context, opts CreateOptions) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for k := range opts.Env {
		if err := ValidateEnvName(k); err != nil {
			return err
		}
	}
	return nil
}

// handOut guards and decorates a handle the provider returned.
func (g *guardedProvider) handOut(ctx context.Context, op, id string, h Handle, err error) (Handle, error) {
	if err != nil {
		return nil, g.fail(ctx, op, id, err)
	}
	if h == nil {
		return nil, Errorf(Internal, g.p.Name()+"."+op, id, "the provider returned neither a handle nor an error")
	}
	return g.wrap(h), nil
}

// wrap guards h (once) and applies the decorator.
func (g *guardedProvider) wrap(h Handle) Handle {
	gh, ok := h.(*guardedHandle)
	if !ok {
		gh = &guardedHandle{h: h, g: g}
	}
	if g.decorate != nil {
		if d := g.decorate(gh); d != nil {
			return d
		}
	}
	return gh
}

func (g *guardedProvider) fail(ctx context.Context, op, id string, err error) error {
	return wrapOnce(ctx, g.p.Name()+"."+op, id, err)
}

// wrapOnce is the guard's one error rule: an error that is or wraps an
// *Error is returned unchanged; any other gets op, id and a code.
func wrapOnce(ctx context.Context, op, id string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	code := CodeOf(err)
	if code == Unknown && ctx != nil && ctx.Err() != nil {
		code = contextCode(ctx.Err())
	}
	return &Error{Code: code, Op: op, ID: id, Err: err}
}

// guardedHandle is the Handle the guard hands out (before decoration).
type guardedHandle struct {
	h Handle
	g *guardedProvider
}

var (
	_ Handle        = (*guardedHandle)(nil)
	_ HandleWrapper = (*guardedHandle)(nil)
)

// Unwrap returns the provider's own handle.
func (h *guardedHandle) Unwrap() Handle { return h.h }

func (h *guardedHandle) ID() string                 { return h.h.ID() }
func (h *guardedHandle) Provider() string           { return h.h.Provider() }
func (h *guardedHandle) WorkspaceRoot() string      { return h.h.WorkspaceRoot() }
func (h *guardedHandle) Capabilities() Capabilities { return h.h.Capabilities() }
func (h *guardedHandle) FS() FS                     { return h.h.FS() }

func (h *guardedHandle) fail(ctx context.Context, op string, err error) error {
	return wrapOnce(ctx, h.h.Provider()+"."+op, h.h.ID(), err)
}

func (h *guardedHandle) Exec(ctx context.Context, cmd Command) (*ExecResult, error) {
	const op = "exec"
	if err := cmd.Validate(); err != nil {
		return nil, h.fail(ctx, op, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, h.fail(ctx, op, err)
	}
	if cmd.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmd.Timeout)
		defer cancel()
	}
	res, err := h.h.Exec(ctx, cmd)
	if err != nil {
		return nil, h.fail(ctx, op, err)
	}
	if res == nil {
		return nil, Errorf(Internal, h.h.Provider()+"."+op, h.h.ID(), "the provider returned neither a result nor an error")
	}
	limitOutput(res, cmd.OutputLimit)
	return res, nil
}

// limitOutput cuts each stream of res to limit bytes (when positive) and
// sets its Truncated flag.
func limitOutput(res *ExecResult, limit int) {
	if limit <= 0 {
		return
	}
	if len(res.Stdout) > limit {
		res.Stdout, res.StdoutTruncated = res.Stdout[:limit:limit], true
	}
	if len(res.Stderr) > limit {
		res.Stderr, res.StderrTruncated = res.Stderr[:limit:limit], true
	}
}

func (h *guardedHandle) Spawn(ctx context.Context, cmd Command) (Process, error) {
	const op = "spawn"
	if err := cmd.Validate(); err != nil {
		return nil, h.fail(ctx, op, err)
	}
	if cmd.Stdin != nil {
		return nil, Errorf(InvalidArgument, h.h.Provider()+"."+op, h.h.ID(), "Command.Stdin is for Exec; write to Process.Stdin instead")
	}
	if err := ctx.Err(); err != nil {
		return nil, h.fail(ctx, op, err)
	}
	sctx, cancel := spawnContext(ctx, cmd.Timeout)
	p, err := h.h.Spawn(sctx, cmd)
	if err != nil {
		cancel()
		return nil, h.fail(ctx, op, err)
	}
	if p == nil {
		cancel()
		return nil, Errorf(Internal, h.h.Provider()+"."+op, h.h.ID(), "the provider returned neither a process nor an error")
	}
	if cmd.Timeout > 0 {
		time.AfterFunc(cmd.Timeout, cancel)
	}
	return &guardedProcess{Process: p, h: h}, nil
}

// spawnContext returns the context a spawned process runs under: ctx, or
// for a positive timeout a child of ctx that the caller cancels once the
// timeout has passed after Spawn returned, whether or not the process still
// runs (the provider stops watching the context once its process has
// exited, so a late cancel is a no-op; stopping the timer at Wait instead
// would leave the child registered with ctx until ctx ends).
func spawnContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithCancel(ctx)
}

func (h *guardedHandle) ConnectPort(ctx context.Context, port int) (Endpoint, error) {
	const op = "connect-port"
	if !h.h.Capabilities().Ports {
		return Endpoint{}, h.fail(ctx, op, Unsupported(h.h.Provider(), "ports"))
	}
	if port <= 0 || port > 65535 {
		return Endpoint{}, Errorf(InvalidArgument, h.h.Provider()+"."+op, h.h.ID(), "port %d is out of range", port)
	}
	if err := ctx.Err(); err != nil {
		return Endpoint{}, h.fail(ctx, op, err)
	}
	ep, err := h.h.ConnectPort(ctx, port)
	if err != nil {
		return Endpoint{}, h.fail(ctx, op, err)
	}
	return ep, nil
}

func (h *guardedHandle) SetEnv(ctx context.Context, vars map[string]string) error {
	for k := range vars {
		if err := ValidateEnvName(k); err != nil {
			return h.fail(ctx, "set-env", err)
		}
	}
	return h.fail(ctx, "set-env", h.h.SetEnv(ctx, vars))
}

func (h *guardedHandle) Snapshot(ctx context.Context, label string) (Snapshot, error) {
	const op = "snapshot"
	if !h.h.Capabilities().Snapshots {
		return Snapshot{}, h.fail(ctx, op, Unsupported(h.h.Provider(), "snapshots"))
	}
	if err := ctx.Err(); err != nil {
		return Snapshot{}, h.fail(ctx, op, err)
	}
	s, err := h.h.Snapshot(ctx, label)
	if err != nil {
		return Snapshot{}, h.fail(ctx, op, err)
	}
	return s, nil
}

func (h *guardedHandle) Fork(ctx context.Context) (Handle, error) {
	const op = "fork"
	if !h.h.Capabilities().Fork {
		return nil, h.fail(ctx, op, Unsupported(h.h.Provider(), "fork"))
	}
	if err := ctx.Err(); err != nil {
		return nil, h.fail(ctx, op, err)
	}
	f, err := h.h.Fork(ctx)
	if err != nil {
		return nil, h.fail(ctx, op, err)
	}
	if f == nil {
		return nil, Errorf(Internal, h.h.Provider()+"."+op, h.h.ID(), "the provider returned neither a handle nor an error")
	}
	return h.g.wrap(f), nil
}

func (h *guardedHandle) Destroy(ctx context.Context) error {
	return h.fail(ctx, "destroy", h.h.Destroy(ctx))
}

// guardedProcess wraps the errors of a spawned process.
type guardedProcess struct {
	Process
	h *guardedHandle
}

// Unwrap returns the provider's own process.
func (p *guardedProcess) Unwrap() Process { return p.Process }

func (p *guardedProcess) Wait(ctx context.Context) (int, error) {
	code, err := p.Process.Wait(ctx)
	if err != nil {
		return code, p.h.fail(ctx, "wait", err)
	}
	return code, nil
}

func (p *guardedProcess) Kill(ctx context.Context, sig syscall.Signal) error {
	return p.h.fail(ctx, "kill", p.Process.Kill(ctx, sig))
}
