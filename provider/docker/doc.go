// Package docker is corral's Docker provider: every sandbox is a container
// on a Docker Engine, driven through the Engine API with the official Go
// client (github.com/moby/moby/client).
//
// # Images
//
// Options.Pull is the pull policy, like Kubernetes' imagePullPolicy:
// PullMissing (the default) pulls Options.Image only when the engine lacks
// it (a built or loaded image is never pulled, and the check costs no
// extra round trip: Create pulls when the engine answers "no such
// image"), PullAlways pulls before every Create, PullNever never pulls and
// a missing image is an error with code NotFound that says so. Snapshot
// images are never pulled. Options.OnPull receives the pull's steps, one
// per layer state change. Credentials come from the auths entries of the
// Docker config (Options.DockerConfig, DOCKER_CONFIG or ~/.docker): base64
// "user:pass" or an identity token; credential helpers are not run. A
// failed pull names the image and the registry: NotFound (no such image
// or tag), PermissionDenied (credentials missing or refused), Unavailable
// (registry unreachable).
//
//	p, err := docker.New(docker.Options{Image: "node:22"}) // pulled on first Create
//
// Ordinary images such as node:22, python:3.12, debian or alpine work as
// they are. Nothing assumes BusyBox: the image needs a POSIX sh and the
// tools BusyBox and GNU coreutils both have (cat, mv, rm, mkdir, chmod,
// chown, stat -c, readlink -f, sleep, kill). The provider's tests run in
// corral-test-base, a FROM-scratch image holding only a static BusyBox
// (scripts/docker-test-image.sh builds it), because no registry is
// reachable where they run; the pull tests push it to a docker-registry
// they start on loopback.
//
// # Containers
//
// Create starts one container per sandbox, named after CreateOptions.ID
// when it is a valid container name (otherwise a readable prefix plus a
// digest of it; the ID itself is kept in the LabelKey label) and labelled
// as corral's (LabelManaged and the other Label constants). Resume finds a
// sandbox by that name, its container id or the original ID, and starts
// it if it was stopped (or unpauses it if it was frozen by docker pause).
// The handle is a sandbox.Pauser: Pause is docker stop (the container
// kept, its processes ended), and the provider a sandbox.PauseReporter
// (Paused inspects without starting), so the idle reaper's pause
// (lifecycle idle.pause) stops a container and the thread's next ensure
// starts it again with its files. Containers run a small sleep loop under Docker's
// init (Init: true, so orphaned grandchildren are reaped), with
// no-new-privileges, resource limits (below) and no host mounts. CreateOptions.Network set to deny gives the container
// no network at all (NetworkMode "none", only lo). Options.Ports are
// published on 127.0.0.1 only, at random host ports.
//
// # Resource limits
//
// Every container is limited by default: 2 GiB of memory with no swap
// beyond it (MemorySwap equals Memory), 2 CPUs' worth of time (a CFS
// quota of 200 ms per 100 ms period, as docker run --cpus 2; on an
// engine with fewer CPUs it binds nothing) and 1024 processes. A process
// that allocates past the memory limit is killed by the kernel's OOM
// killer (exit 137); a fork past the process limit fails. Options.Memory,
// Options.CPUs and Options.PidsLimit raise or lower each limit (0 keeps
// the default, DefaultMemory, DefaultCPUs, DefaultPidsLimit), Unlimited
// removes it; Provider.Limits reports what containers get. ParseMemory,
// ParseCPUs and ParsePids read the forms corral.yaml and the CLI accept
// ("2g", "1.5", "0" or "unlimited" for none). The limits are fixed when a
// container is created: a sandbox resumed later keeps those it was made
// with. An engine that cannot enforce a limit (no swap accounting, say)
// creates the container anyway and the provider logs the engine's
// warning.
//
// # Environment and secrets
//
// CreateOptions.Env usually carries secrets, so it never reaches the
// container's configuration: docker inspect, commits, snapshots and fork
// images do not hold it. The handle keeps it in memory and sends it with
// every command, laid over by SetEnv and then by Command.Env; the daemon
// lays these over the image's environment, so PATH and HOME stay the
// image's. After Resume or RestoreSnapshot the caller re-applies it with
// SetEnv.
//
// # Commands and kills
//
// Commands run on sandbox/execproc, the process layer the wire-backed
// providers share; exec.go is only the Engine's exec as its Backend.
// Docker cannot signal an exec, only a container's PID 1. Every command
// therefore runs under the layer's one-line sh wrapper that writes its pid as the
// first line of standard error (the provider strips it) and then execs
// the command, so the pid is the command's own. A docker exec process
// leads its own session and process group, which its children and
// backgrounded grandchildren share; Process.Kill runs one more exec that
// signals that group, waits up to Options.KillGrace for it to empty after
// SIGTERM, sends SIGKILL to what is left and verifies that nothing
// survived. Concurrent kills share one; a kill after the process exited
// costs nothing. Cancelling the context of Exec or Spawn (or
// Command.Timeout passing) kills the same way. The pid never touches the
// container's file system, so there are no pid files to clean up.
//
// Standard output and error arrive separately; a process killed by signal
// N exits with 128+N. A spawned process's stdin is the attached stream:
// Close half-closes the connection, so the process reads EOF while its
// output keeps streaming (Capabilities().WritableStdin is true, as the
// conformance suite measures).
//
// # Files, snapshots and forks
//
// Handle.FS is sandbox/execfs: each operation is one exec of a short sh
// script guarded by sandbox.ShellPathGuard. Handle.Snapshot commits the
// container to Options.SnapshotRepository (default "corral-snapshot") with
// labels naming the sandbox, the label and the time, and returns the image
// reference, which RestoreSnapshot takes. Fork commits and starts a new
// container from the image; the image is removed with the fork. List,
// ListSnapshots and Prune find corral's containers and images by label and
// age; nothing without corral's labels is touched.
//
// # Errors
//
// Errors carry codes from package sandbox: an unreachable engine is
// Unavailable and names the address; a missing image, a removed container
// or a missing snapshot is NotFound; a stopped container is
// FailedPrecondition until Resume starts it.
//
// New does not contact the engine; the first operation connects and
// negotiates the API version (the client supports API 1.40 and later).
// Ping checks the engine up front and CheckImage the image.
package docker
