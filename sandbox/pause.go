package sandbox

import "context"

// Pauser is the optional interface of a Handle whose sandbox can be paused:
// stopped so that it costs no compute, with its files kept. The idle reaper
// (Lifecycle.Idle.Pause) pauses through it; reach it with As, since the
// handle a caller holds is usually guarded:
//
//	var p sandbox.Pauser
//	if sandbox.As(h, &p) { err = p.Pause(ctx) }
//
// There is no Unpause: Provider.Resume of a paused sandbox starts it again
// (a provider that implements Pauser must make it so), which is what the
// thread's next ensure does anyway. What ran in the sandbox does not
// survive a pause — processes are stopped, only the file system is kept —
// so a process kept by Lifecycle.KeepBackground ends when the sandbox is
// paused.
//
// Docker implements it (docker stop, the container kept); the local
// provider does not (a directory on the host has nothing to stop).
type Pauser interface {
	// Pause stops the sandbox, keeping its file system. Pausing a paused
	// sandbox is a no-op. A sandbox that is gone is NotFound.
	Pause(ctx context.Context) error
}

// PauseReporter is the optional interface of a Provider that can say,
// without starting it, whether one of its sandboxes is paused (Resume
// would start it). The idle reaper asks on each pass rather than keeping
// a paused mark in the instance record, so the provider's own state is
// the one truth and a sandbox started by someone else is seen as running.
// Reach it through a guarded provider with ProviderAs.
type PauseReporter interface {
	// Paused reports whether the sandbox id is paused (stopped, its files
	// kept). A sandbox that is gone is NotFound.
	Paused(ctx context.Context, id string) (bool, error)
}
