// Package local is the corral provider that runs commands as ordinary
// processes on the host.
//
// # No isolation
//
// A local sandbox is only a directory. Commands run as the same user as the
// corral process, with the host's environment, network and file system; the
// workspace path rules keep corral's own file operations inside the
// directory, but nothing stops a command from reading or writing anywhere
// the user can. Use it for development, for trusted agents, or inside a
// machine that is itself disposable. Use provider/docker (or a cloud
// provider) when the agent must not touch the host.
//
// Nor does it limit resources: a command may use all the memory, CPU and
// processes the host lets the user have (ulimit, and whatever cgroup the
// caller itself runs in). Per-user rlimits would cap every process of the
// user, not one sandbox, and per-sandbox cgroups need a delegation most
// hosts do not grant, so the provider sets none and corral providers
// reports its limits as none. Run corral itself under a limit (systemd-run
// --user -p MemoryMax=…, a container) when that matters.
//
// # Sandboxes
//
// Each sandbox is a directory: a fresh one under Options.BaseDir (removed on
// Destroy), or the fixed Options.Dir (kept on Destroy unless
// Options.RemoveDir is set). The handle's id is the directory's absolute
// path; Resume reopens it, and a missing directory is reported as NotFound.
// Fork copies the directory into a new sandbox; there are no snapshots.
//
// # Processes
//
// Every command runs in its own process group, with the environment of the
// host minus Options.ScrubEnv, plus the sandbox's environment, plus the
// command's. Kill signals the whole group (SIGTERM, then SIGKILL after
// Options.KillGrace) so that backgrounded grandchildren die too; the
// conformance suite proves it. Each command also carries CORRAL_SANDBOX_ID,
// so Destroy can find and kill processes that an earlier corral process
// started in the same sandbox (on Linux, by reading /proc). That scan is
// skipped only for a directory that carries the idle mark (the extended
// attribute user.corral.idle), which Create and Fork set on a directory they
// have just made and every corral process removes before it starts the first
// command there; a file system without user xattrs is always scanned.
package local
