// Package upstashbox is corral's provider for Upstash Box, on the
// provider kit (provider/cloudhttp for REST and the WebSocket,
// sandbox/execproc for processes, sandbox/execfs for files), with a fake
// of the backend in upstashbox/upstashboxfake.
//
// # Wire calls
//
// Every request carries X-Box-Api-Key (UPSTASH_BOX_API_KEY; the base URL
// is UPSTASH_BOX_BASE_URL, else https://us-east-1.box.upstash.com). Paths
// and fields are those of @upstash/box 0.5.5 (dist/client.js):
//
//	POST   /v2/box {name, labels, size, runtime, keep_alive, network_policy}   create; then GET /v2/box/{id} until not "creating"
//	GET    /v2/box/{id|name}                            Resume, and the create's reconciliation by name
//	GET    /v2/box?label=corral                         corral sandbox ls / prune
//	DELETE /v2/box/{id}                                 Destroy
//	GET    /v2/box/{id}/status, POST …/resume           Resume of a paused box
//	POST   /v2/box/{id}/exec {command, folder}          a spawned command's detached start
//	GET    /v2/box/{id}/exec-session                    the exec session WebSocket (every Exec, file operation and follower)
//	POST   /v2/box/{id}/snapshots {name}, GET …/snapshots   Snapshot (polled until "ready")
//	DELETE /v2/box/{id}/snapshots/{sid}                 DeleteSnapshot, and Fork's scratch snapshot
//	POST   /v2/box/from-snapshot {snapshot_id, …}       RestoreSnapshot and Fork
//	POST   /v2/box/{id}/preview {port, bearer_token|basic_auth}   ConnectPort
//
// Errors are {"error": message}; cloudhttp maps the status (401/403
// PermissionDenied, 404 NotFound, 429 ResourceExhausted after the
// Retry-After) and keeps the request id; the key is never in an error.
// A box whose status is "deleted" or "error" is NotFound.
//
// # Commands that outlive their socket
//
// The session WebSocket speaks JSON frames (start{argv, cwd, env},
// stdin{data}, stdin_close, signal, terminate{graceMs}; started{pid},
// stdout/stderr{data} in base64, exit{code}, error{message}). Dropping it
// kills the command, and nothing re-attaches to it; each stream is capped
// at 8 MiB. So no command corral starts depends on a socket:
//
//   - Spawn (and so a run's journal wrapper) starts the command through
//     the HTTP exec with a launcher that returns at once: the waiter and
//     the command are in sessions of their own (setsid), the command's
//     stdout and stderr appended to files, its exit code written to a
//     third. A follower session streams the files from the offsets
//     received and exits with the code; when its socket drops it is
//     dialled again from the offsets, and the command never notices. When
//     the corral process that spawned a journal wrapper dies, the wrapper
//     runs on and a new process takes the run over from the journal:
//     cmd/corral's TestUpstashBoxCrashTakeover SIGKILLs the driver and
//     `corral attach` delivers the rest exactly once.
//   - Exec's session starts the command the same way (its stdin the
//     session's, which is a real half-close) and follows it in the same
//     socket, so an Exec costs one round trip, as the SDK's exec.command.
//     A follower sends at most 4 MiB and is then dialled again, so output
//     past the session's 8 MiB cap is not lost. A dropped Exec session
//     is Unavailable.
//   - The environment (create env and SetEnv, never sent to Box: env_vars
//     are kept with the box) travels in an Exec's start frame; for a
//     Spawn, whose HTTP exec takes no cwd or env, it is written as export
//     lines (names checked by sandbox.ValidateEnvName, values quoted by
//     sandbox.ShellQuote) through a session's stdin into a file the
//     launcher sources and removes. Secrets are never in argv or a REST
//     body (TestSecretsNeverInRESTBodies).
//
// The kill is execproc's group kill (a kill script over a session) on
// the command's own process group: KillMeasured passes, so
// killableProcesses is claimed. writableStdin is not: a spawned command
// reads /dev/null (a detached command has no socket to read from).
// ownProcessTable is not claimed against the fake (host processes).
//
// # Paths
//
// The workspace is /workspace/home (the SDK's Box.WORKSPACE);
// Options.DiscoverWorkdir learns it from the box instead (one HTTP exec
// of pwd at open), which the fake's host-directory boxes need.
//
// # Differences from the reference
//
// The reference ran spawns over the session, so a run died with its
// socket; here nothing does. It passed env at create (persisted by Box);
// here it stays in the handle. The pinned SDK (0.5.5, the newest on npm)
// predates sessions: the session path is the one this provider and its
// fake agree on (upstashbox.SessionPath), the frames are the reference's,
// and only the live suite can confirm them.
package upstashbox
