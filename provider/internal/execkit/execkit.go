// Package execkit is the exec side of a provider's handle over one
// execproc.Backend: the process runner, the handle's environment and an
// execfs file system through the same runner. A handle embeds *Kit for its
// FS, Exec, Spawn and SetEnv (and may define its own SetEnv over the
// kit's, as cloudflare does to hand the values to the sandbox too).
package execkit

import (
	"context"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execfs"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// Kit is a runner, an environment and an exec-backed file system over one
// backend.
type Kit struct {
	procs *execproc.Runner
	env   *execproc.Env
	fs    sandbox.FS
}

// New returns the kit for b. opts.Env is the kit's environment: env (the
// create-time variables, copied; nil for none), then SetEnv's overlays.
// The file system is rooted at opts.Root and its commands run with no
// environment, from "/", as operation "<opts.Provider>.fs".
func New(b execproc.Backend, opts execproc.Options, env map[string]string) *Kit {
	k := &Kit{env: execproc.NewEnv(env)}
	opts.Env = k.env.Copy
	k.procs = execproc.New(b, opts)
	op := opts.Provider + ".fs"
	k.fs = execfs.New(func(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
		return k.procs.Run(ctx, op, cmd.Argv(), cmd.Stdin, "")
	}, execfs.Options{Root: opts.Root, Provider: opts.Provider})
	return k
}

// Procs returns the process runner.
func (k *Kit) Procs() *execproc.Runner { return k.procs }

// Env returns the environment later commands get (create-time variables,
// then SetEnv overlays).
func (k *Kit) Env() *execproc.Env { return k.env }

// FS returns the exec-backed file system.
func (k *Kit) FS() sandbox.FS { return k.fs }

// Exec runs a command to completion.
func (k *Kit) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	return k.procs.Exec(ctx, cmd)
}

// Spawn starts a command and returns once it runs. Cancelling ctx, or
// Command.Timeout passing, kills it.
func (k *Kit) Spawn(ctx context.Context, cmd sandbox.Command) (sandbox.Process, error) {
	return k.procs.Spawn(ctx, cmd)
}

// SetEnv merges vars into the environment of every later command. The
// values live only in the kit (never in the backend).
func (k *Kit) SetEnv(ctx context.Context, vars map[string]string) error { return k.env.Set(vars) }
