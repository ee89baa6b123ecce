// Package sprites is corral's provider for Sprites by Fly.io
// (api.sprites.dev): persistent Linux microVMs addressed by name, driven
// over REST and an exec WebSocket with the Bearer token on every request
// and on the upgrade (SPRITES_API_KEY; SPRITES_API_URL for another API).
//
// # Wire calls
//
//   - Create: POST /v1/sprites {name, url_settings{auth}, labels:
//     ["corral", "k=v"…], wait_for_capacity}. The name is the sandbox key
//     (SpriteName: the key when it is a valid Sprite name, else a cleaned
//     prefix and a digest), so Resume finds it and the Sprite's URL is
//     stable; an unknown outcome (504, reset) is reconciled by GET by
//     name, never retried into a second Sprite. Then one exec (from /)
//     makes the workspace ($HOME/workspace, or Options.Workdir) and reads
//     the Sprite's default environment.
//   - Resume: GET /v1/sprites/{name} (404 is NotFound) and the same exec.
//     Destroy: DELETE /v1/sprites/{name} (404 is fine); checkpoints die
//     with the Sprite.
//   - Exec and Spawn (sandbox/execproc): WSS /v1/sprites/{name}/exec with
//     cmd repeated for argv, path, dir, stdin=true only when the caller
//     writes stdin, and env=K=V. env= replaces the default environment on
//     Sprites, so a command with an overlay gets the default environment
//     read at open with the overlay laid over it (PATH survives). The
//     server's session_info (session_id = the process's pid) comes first;
//     output is binary frames 0x01 stdout / 0x02 stderr; the end is the
//     binary exit frame 0x03 <code> (or the JSON exit message). Stdin is
//     0x00 frames and 0x04 for EOF. A spawned command is started with
//     max_run_after_disconnect=0 (Sprites' non-TTY default is 10s), so a
//     durable run's journal wrapper outlives the corral process that
//     started it; an exec keeps the default.
//   - Kill: POST /v1/sprites/{name}/exec/{pid}/kill?signal=&timeout=grace.
//     Sprites signals the process group and escalates to SIGKILL after the
//     timeout; its NDJSON progress stream is read to the end. The pid is
//     the one execproc's wrapper reports, which is the session's (the
//     wrapper execs the command). KillableProcesses is measured by
//     sandboxtest's KillMeasured case against the fake, whose kill reaches
//     the group as the real one's events say it does.
//   - Files: exec-backed (sandbox/execfs), one exec WebSocket per
//     operation; the frames are binary-safe, so read and write cost one
//     round trip each, as the SDK's fs/read and fs/write do, and the
//     shared path and link guards apply. The REST fs routes are used for
//     the read-back after a checkpoint restore.
//   - Ports: a Sprite has one URL, for one HTTP port (Options.HTTPPort,
//     8080). ConnectPort(httpPort) returns it; with url_settings.auth
//     "sprite" (the default) the Bearer token is in Endpoint.Headers
//     (Authorization) and Token. Another port is FailedPrecondition.
//   - Listing and prune (registry.Lister, Pruner, Pinger): GET /v1/sprites
//     page by page, keeping the Sprites labelled "corral".
//
// # Snapshots
//
// Sprites' checkpoints are taken and restored in place and die with the
// Sprite: there is no restore into a new sandbox, so the contract's
// Snapshots capability is false and Snapshot, RestoreSnapshot and
// DeleteSnapshot return an UnsupportedCapabilityError that says why. The
// Sprite-specific operation is the Checkpointer interface of a handle:
// Checkpoint (POST …/checkpoint {comment}, the NDJSON drained, then GET
// …/checkpoints for the new "vN"), Checkpoints, and RestoreCheckpoint
// (POST …/checkpoints/{id}/restore, drained). After a restore the overlay
// is listable before reads work (the reference's finding), so
// RestoreCheckpoint writes a sentinel and reads it back until two reads in
// a row succeed, with backoff between tries and RestoreTimeout as the
// bound, instead of sleeping a fixed time.
//
// # Differences from the reference
//
// The reference (a hand-written REST + WebSocket client) claimed
// writableStdin false and killableProcesses unverified; here stdin is sent
// when asked for and both are measured by the suites. It ran commands
// under bash -c with env= carrying only the overlay (commands lost PATH);
// here argv is sent as is and env= carries the default environment with
// the overlay. Its snapshot waited 3 s before probing; here the probe
// starts at once. Its exec sessions died 10 s after a disconnect; spawned
// commands here are kept (max_run_after_disconnect=0). A network deny
// policy is not applied (NetworkPolicy false).
package sprites
