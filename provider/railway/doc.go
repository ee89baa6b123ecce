// Package railway is corral's provider for Railway sandboxes.
//
// Wire calls (as the official `railway` SDK 3.11 makes them):
//   - GraphQL at backboard (/graphql/v2; Authorization: Bearer for
//     RAILWAY_API_TOKEN, Project-Access-Token for RAILWAY_TOKEN):
//     RailwaySandboxCreate (create, create from a checkpoint: template.name,
//     fork: sourceSandboxId), RailwaySandbox (resume; null is NotFound),
//     RailwaySandboxDestroy, RailwayGenerateShellToken (one per socket),
//     RailwaySandboxCheckpointCreate, RailwaySandboxCheckpoints,
//     RailwaySandboxCheckpointDelete.
//   - The tcp-proxy exec socket (/ws/exec, subprotocols "railway-shell"
//     and the shell token): init_exec {command, cwd, env}, stdin_close;
//     binary frames 1 stdout and 3 stderr; exit {exit_code} (-1 for a
//     signalled process, mapped to 137).
//   - The files socket (/ws/files): write_start, write_ready, chunk frames
//     and ok, used only to hand an Exec its stdin (the exec socket has no
//     stdin data frame in the SDK's protocol).
//
// Sandboxes have opaque ids and no name or metadata: the key and the
// marker ride in the create-time variables (CORRAL_SANDBOX_KEY, CORRAL=1),
// never a secret; Handle.ID is the id corral stores. Network deny is
// refused (both isolation modes keep public egress). The file system is
// not durable: an idle sandbox is destroyed and resumes as NotFound. A
// handle heartbeats (a no-op exec) while a spawned process is live. Kill
// is execproc's group kill (TERM, 2 s, KILL, verified) run as a second
// command. Snapshots are checkpoints named corral-<id>-<random>.
//
// Differences from the reference: no ports (SDK 3.11's create has no
// domains), spawned processes have no writable stdin, checkpoints are
// deleted through sandboxCheckpointDelete (3.11 has it).
package railway
