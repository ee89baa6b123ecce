// Package sandbox is corral's portable sandbox contract.
//
// A [Provider] creates, resumes and destroys sandboxes on one backend (host
// processes, Docker, a cloud service). A [Handle] is one live sandbox: its
// file system ([FS]), command execution ([Handle.Exec], [Handle.Spawn]),
// ports, environment and, where the backend has them, snapshots and forks.
//
// Code that uses a sandbox branches on its [Capabilities], never on a
// provider's name. An optional operation that a provider lacks returns an
// error whose code is [Unimplemented] (an [UnsupportedCapabilityError]); it
// is never a silent no-op and never a panic.
//
// Every provider exposes the portable workspace root [WorkspaceRoot]
// ("/workspace"). Paths given to an [FS] are checked by one shared rule set
// ([CleanPath], [ShellPathGuard]): "..", absolute paths outside the root and
// symbolic links whose target leaves the root are rejected the same way on
// every provider.
//
// [Guard] wraps a provider so that every handle it makes checks commands,
// environment names and capabilities, enforces Command.Timeout and
// OutputLimit and wraps errors once, before the provider is called, with a
// decorator hook for cross-cutting wrappers; [As] reaches a backend's own
// handle through such wrappers. The provider registry guards every
// provider it hands out.
//
// This package imports no provider SDK and no database driver. Providers
// live in corral/provider/..., and the conformance suite every provider must
// pass lives in corral/sandbox/sandboxtest.
package sandbox
