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
//	GET    /v2/box/{id}/exec-session                    the exec session WebSocket (every Exec, file operation, spawn spec and follower)
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
//   - Spawn (and so a run's journal wrapper) is three calls: a session
//     writes the command's spec from its stdin into a file (its
//     environment as export lines, names checked by
//     sandbox.ValidateEnvName and values quoted by sandbox.ShellQuote, and
//     an exec of its argv, quoted the same way); the HTTP exec runs a
//     launcher that starts a waiter in a session of its own (setsid),
//     records the waiter's pid and returns at once; the waiter runs the
//     spec with setsid (the command leads its own process group), its
//     stdout and stderr appended to files, and writes its exit code to a
//     third. A follower session streams the files from the offsets
//     received and exits with the code; when its socket drops it is
//     dialled again from the offsets, and the command never notices. When
//     the corral process that spawned a journal wrapper dies, the wrapper
//     runs on and a new process takes the run over from the journal:
//     cmd/corral's TestUpstashBoxCrashTakeover SIGKILLs the driver and
//     `corral attach` delivers the rest exactly once.
//   - Only the command carries its argv (TestSpawnArgvOnlyInCommand):
//     something in the box that kills by argv (journaltest's
//     follow/FollowerShellKilled kills the reader's follower so) reaches
//     the command, never the launcher or the waiter. A follower whose
//     waiter is not running and left no code (killed, or never recorded)
//     ends with 137 once the output is drained (TestFollowerWithoutWaiter;
//     a missing pid file once kept a follower, and the journal reader
//     behind it, waiting forever).
//   - Exec's session starts the command the same way (its stdin the
//     session's, which is a real half-close) and follows it in the same
//     socket, so an Exec costs one round trip, as the SDK's exec.command.
//     A follower sends at most 4 MiB and is then dialled again, so output
//     past the session's 8 MiB cap is not lost. A dropped Exec session
//     is Unavailable.
//   - The environment (create env and SetEnv, never sent to Box: env_vars
//     are kept with the box) travels in an Exec's start frame and in a
//     Spawn's spec, never in argv or a REST body
//     (TestSecretsNeverInRESTBodies).
//
// The kill is execproc's group kill (a kill script over a session) on the
// command's own process group; it counts no zombie as alive (a killed
// follower's children are orphans the box's init reaps when it gets to
// them; waiting for that cost 1.6 s a kill here).
// KillMeasured passes, so killableProcesses is claimed. writableStdin is
// not: a spawned command reads /dev/null (a detached command has no
// socket to read from). ownProcessTable is not claimed against the fake
// (host processes).
//
// Output frames of the form {"type":"stdout","data":"…"} are decoded
// straight from the socket's buffer; other forms go through
// encoding/json. (Under -race, encoding/json's per-byte scan was most of
// an Exec's cost: 32 MiB took 9.3 s, now about 3.)
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
// here it stays in the handle.
//
// # The session path
//
// The pinned TypeScript SDK (@upstash/box 0.5.5, the newest on npm) has
// no WebSocket use at all: its dist/ speaks REST only (exec, exec-stream
// and the rest above). The path, /v2/box/{id}/exec-session, is that of
// the official Python SDK (upstash/box, packages/python-sdk,
// upstash_box/_exec_session.py: session_url turns the base URL's http
// into ws and appends it; the headers are the REST ones), whose frames
// are the ones above; the TypeScript SDK's exec.session in the same
// repository (its box-exec-session tests) is not published yet. The
// SDK check therefore drives the REST calls only, and only the live
// suite exercises a real session.
package upstashbox
