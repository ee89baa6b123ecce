// Package railway is corral's provider for Railway sandboxes.
//
// Configuration: a token, RAILWAY_TOKEN (a project token, sent as
// Project-Access-Token; the SDK's first choice) or RAILWAY_API_TOKEN (an
// account or workspace token, sent as Authorization: Bearer), and
// RAILWAY_ENVIRONMENT_ID; RAILWAY_GRAPHQL_ENDPOINT and
// RAILWAY_TCP_PROXY_WS_ENDPOINT move the endpoints as they move the SDK's.
// corral.yaml's provider.railway section (Section) and the CLI flags
// --environment, --region, --idle-timeout and --network set the rest.
//
// Wire calls (as the official `railway` SDK 3.11 makes them):
//   - GraphQL at backboard (/graphql/v2): RailwaySandboxCreate (create;
//     from a checkpoint: template.name; fork: sourceSandboxId),
//     RailwaySandbox (resume; null is NotFound), RailwaySandboxes (the
//     listing, paged), RailwaySandboxDestroy, RailwayGenerateShellToken
//     (one per socket), RailwaySandboxCheckpointCreate,
//     RailwaySandboxCheckpoints, RailwaySandboxCheckpointDelete. Backboard
//     answers a refusal with HTTP 200 and errors: "Not Authorized" is
//     PermissionDenied, "… not found" NotFound.
//   - The tcp-proxy exec socket (/ws/exec, subprotocols "railway-shell"
//     and the shell token): init_exec {command, cwd, env}, stdin_close;
//     binary frames 1 stdout and 3 stderr; durable_session {name}; exit
//     {exit_code} (-1 for a signalled process, mapped to 137). A socket
//     that drops before the exit is reattached to the command's durable
//     session (init_exec with the placeholder command ":" and
//     durable_session_name; the retained output is replayed from the start
//     and what was delivered is skipped), up to five times; past that,
//     Exec is Unavailable and says how much output arrived.
//   - The files socket (/ws/files): write_start, write_ready, chunk frames
//     and ok, used only to hand an Exec more than 16 KiB of stdin (the exec
//     socket has no stdin data frame in the SDK's protocol; smaller stdin
//     rides in the command as printf octal escapes). The FS is execfs
//     (exec-backed: the path guard runs in the sandbox).
//
// Round trips, measured against the fake (TestRequestCounts): create 3
// (create, then one command that makes the workspace and reads $HOME: a
// token and a socket), exec 2, write 2, read 2; the SDK's create plus its
// files.mkdir is 3, exec 2, and a fresh handle's write and read 2 each
// (0 on the files socket it keeps open between calls).
//
// Sandboxes have opaque ids and no name, label or metadata: the marker
// and the key ride in the create-time variables (CORRAL=1,
// CORRAL_SANDBOX_KEY), which Railway makes every command's environment;
// never a secret (opts.Env stays in the handle and travels in each init
// frame). Handle.ID is the id corral stores. The listing shows no
// variables, so ListSandboxes asks each RUNNING sandbox for them with one
// command; a sandbox that does not answer cannot be shown to be corral's
// and is left out. Prune destroys corral's sandboxes and deletes corral's
// checkpoints (corral-…) by age: Railway has no hook that deletes a
// checkpoint with its sandbox.
//
// Capabilities: fs, exec, env, backgroundProcesses, killableProcesses
// (measured by sandboxtest's KillMeasured: execproc's group kill, TERM,
// 2 s, KILL, verified, as a second command), snapshots (checkpoints
// named corral-<id>-<random>, environment-scoped, bootable by name,
// outliving their source), fork (a live disk fork; processes are not
// copied). Not: networkPolicy (network deny is refused: both isolation
// modes, ISOLATED and PRIVATE, keep public egress), durableFilesystem (an
// idle sandbox is destroyed and resumes as NotFound: corral's ensure
// makes a new one, and a detached run whose sandbox is gone fails saying
// so), writableStdin (spawned processes), ports. A handle heartbeats (a
// no-op command, default every third of the idle timeout) while one of
// its spawned processes is live.
//
// Differences from the reference: no ports (SDK 3.11's create has no
// domains), no resources, spawned processes have no writable stdin (the
// 3.11 exec socket has no stdin frame), checkpoints are deleted through
// sandboxCheckpointDelete (3.11 has it), a dropped exec socket is
// reattached rather than failing the command, and the listing and prune
// exist (the reference has neither).
package railway
