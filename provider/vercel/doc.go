// Package vercel is corral's provider for Vercel Sandbox, over the REST
// API that the official SDK (@vercel/sandbox 3.x) speaks; there is no Go
// SDK. Every call carries Authorization: Bearer <token> and the teamId
// query; create and get carry the projectId. The token is VERCEL_TOKEN
// (or the variable corral.yaml's tokenEnv names), given explicitly: a
// VERCEL_OIDC_TOKEN in the environment is never picked up by accident,
// as the SDK would.
//
// # Sandboxes, sessions, resume
//
// A sandbox is named: the corral key is its name (SandboxName shortens
// keys that do not fit with a digest), so Resume finds it by the key, and
// a create whose outcome is unknown is reconciled by a get of that name.
// Sandboxes are created persistent: a sandbox is storage plus at most one
// running session (a VM), and a session that stops — its timeout
// (Options.Timeout, default 30 minutes), a snapshot — leaves the files for
// the next one. Resume is GET /v2/sandboxes/{name}?resume=true, which
// starts a session when none runs; a session call answered 410
// (sandbox_stopped) or 422 (stopping, snapshotting) resumes and retries
// once, as the SDK's withResume does. Destroy deletes the sandbox (the
// reference only stopped it, which keeps a persistent sandbox's storage).
// Tags mark corral's sandboxes (corral=1, corral-key=<key>) for
// `corral sandbox ls/prune --provider vercel`. Runtimes: node24
// (default), node22, python3.13. Network deny is {"mode": "deny-all"}.
// An egress allow-list (CreateOptions.Egress) is Vercel's own firewall:
// networkPolicy {allow: [names, *.wildcards], subnets: {allow: [ip/32]}},
// everything else denied; the format has no ports, so an entry with a
// port is refused at run start (sandbox.NativeEgress, TestEgressTranslated).
//
// # Wire calls
//
//   - POST /v2/sandboxes {projectId, name, runtime, ports, timeout,
//     persistent, tags, networkPolicy, resources, source{snapshot}}
//   - GET /v2/sandboxes/{name}?projectId=&resume=true; DELETE the same;
//     PATCH {ports} (ConnectPort of a port not exposed yet); GET
//     /v2/sandboxes?project=&tags=corral:1 (cursor pages)
//   - POST /v2/sandboxes/sessions/{id}/cmd {command, args, cwd, env,
//     wait: true, logs: true}: one NDJSON answer with the command record,
//     the {stream, data} log lines as they come and the finished record
//     with the exit code — one round trip per command, as the SDK's
//     runCommand
//   - GET …/cmd/{cmdId}/logs and GET …/cmd/{cmdId}?wait=true, only when
//     that stream dropped: the logs are re-read from the start, skipping
//     the bytes already delivered per stream, and the exit code is asked
//     for (TestDroppedStream)
//   - POST …/fs/mkdir {path} at create for the workspace, an answer of
//     400 "File exists" being success (the API's mkdir is not recursive
//     and /vercel/sandbox exists)
//   - POST …/fs/write (a gzipped tar, x-cwd: /) for an Exec's stdin, in
//     parts of 512 KiB: the API has no stdin for commands, so a launcher
//     joins the parts into a file, opens it as stdin and removes it
//   - POST …/snapshot (Vercel stops the session to take it), DELETE
//     /v2/sandboxes/snapshots/{id}, and create with source {type:
//     snapshot} for RestoreSnapshot (a missing snapshot is 410
//     snapshot_not_found: NotFound)
//
// Files go through sandbox/execfs (the path guard runs in the sandbox, so
// a link cannot lead a read or write out of the workspace), with each
// command's stdout base64-encoded in the sandbox: the API carries output
// as JSON strings, which cannot hold bytes that are not UTF-8. The
// native fs/read (404 for a missing file) is what the SDK uses; corral
// does not, because it would follow links out of the workspace.
//
// # Kill
//
// The API's kill (POST …/cmd/{cmdId}/kill {signal: <number>}, what the
// SDK's Command.kill sends) signals the one process the API started; the
// reference never even called it. So every command starts under a
// launcher that runs it in a session of its own (setsid, when the image
// has it), making it the leader of a process group, and execproc's group
// kill runs as a second command: SIGTERM to the group, the grace, SIGKILL,
// verified. sandboxtest's KillMeasured passes against the fake, whose
// kill reaches one pid as the API's does, so killableProcesses is
// measured; TestKillReachesTheTree shows the API's own kill leaving a
// backgrounded grandchild beating where the provider's stops it.
//
// # Differences from the reference (TanStack's vercel provider)
//
// Kill reaches the tree (killable true, measured); Destroy deletes
// instead of stopping; snapshots and RestoreSnapshot are supported;
// files are exec-backed with the path guard instead of base64 over exec
// without one; the token is never an OIDC token by accident; ports not
// declared at create are added on ConnectPort. writableStdin is false
// (no stdin on the API); ownProcessTable is not claimed (the fake's
// sandboxes are host processes), and fork is not supported.
//
// The fake (vercelfake) is the test double; its package doc lists what it
// imitates and where it departs (loopback route URLs).
package vercel
