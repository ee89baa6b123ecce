// Package blaxel is corral's provider for Blaxel sandboxes
// (https://blaxel.ai), over Blaxel's REST APIs with provider/cloudhttp:
// the control plane (https://api.blaxel.ai/v0, headers
// X-Blaxel-Authorization: Bearer BL_API_KEY and X-Blaxel-Workspace:
// BL_WORKSPACE) and each sandbox's own API (blaxel-ai/sandbox's
// sandbox-api, at the metadata.url the control plane returns, same
// headers). It registers as "blaxel" (corral.yaml provider.blaxel, see
// Section).
//
// # Wire calls
//
//   - Create: POST /sandboxes {metadata: {name, labels}, spec: {region,
//     runtime: {image, memory, envs: [], generation: mk3, ttl}}}, then one
//     command that makes the workspace. The labels are corral=1,
//     corral-key=<key> and corral-create-attempt=<random>: a create whose
//     outcome is unknown (no answer, 408, 409, 425, 429, 5xx — the edge
//     answers 504 to creates the control plane accepted) is reconciled by
//     polling GET /sandboxes/{name} (up to Options.ReconcilePolls looks, a
//     second apart): a DEPLOYED sandbox with this attempt's label is
//     adopted; one of ours that FAILED, or that appears after the caller
//     gave up, is deleted; a sandbox without the label is someone else's,
//     never deleted (AlreadyExists on a 409); a name that stays unknown is
//     created again (three sends at most).
//   - Resume: GET /sandboxes/{name}; 404 and the gone statuses
//     (GoneStatuses: DELETING, TERMINATED, TERMINATING, FAILED,
//     DEACTIVATING, DEACTIVATED) are NotFound.
//   - Destroy: DELETE /sandboxes/{name} (404 is fine). List/prune: GET
//     /sandboxes, corral's by label.
//   - Exec and Spawn (sandbox/execproc): POST {url}/process with Accept:
//     text/event-stream, whose answer is NDJSON {type: stdout|stderr|
//     keepalive|result, data}; the result line carries the exit code. The
//     sandbox-api runs `sh -c <command>`, so the command is a launcher
//     script with every argument quoted by sandbox.ShellQuote; it starts
//     the command under setsid and waits for it (exit 128+N for signal N),
//     and execproc's group kill reaches its grandchildren (measured by
//     sandboxtest: killableProcesses true). The environment rides in the
//     request's env field, never in the command text nor in the sandbox's
//     configuration.
//   - An Exec's stdin is uploaded first (PUT {url}/filesystem/{path},
//     multipart, byte-exact) and read by the launcher; a spawned command
//     has no stdin (writableStdin false: the sandbox-api this was written
//     against has no stdin route).
//   - FS: sandbox/execfs over Exec, stdout base64-encoded on the wire (the
//     NDJSON events are JSON strings, which cannot hold bytes that are not
//     UTF-8).
//   - ConnectPort: GET/POST /sandboxes/{name}/previews (preview
//     corral-<port>, private unless Options.PublicPreviews), then POST
//     …/previews/{preview}/tokens for a token valid Options.PreviewTTL,
//     returned as Endpoint.Token and the X-Blaxel-Preview-Token header.
//
// # Defaults and options
//
// Image blaxel/base-image:latest, memory 2048 MB, TTL 1h (Options.NoTTL,
// ttl: none in corral.yaml, opts out), workspace /workspace ("~/…" is
// under the sandbox user's home). Names are the key when it is DNS-safe
// and at most 49 characters, else a cleaned prefix and a 24-hex sha256 of
// the key (SandboxName).
//
// # Differences from the reference (TanStack's Blaxel provider)
//
//   - Output is streamed from the process API's NDJSON answer instead of a
//     bash supervisor with mkfifo and base64 records: images need sh and
//     base64 only (plus setsid for group kills), and there is no 8 MiB cap
//     per stream. File reads are base64 on the wire instead of the native
//     read (byte-exact, with the path guard in the sandbox).
//   - killableProcesses is true, measured by the suite against the fake,
//     whose kill semantics are the sandbox-api's (process groups).
//   - The SDK's process-global auth is not an issue: each Provider holds
//     its own key and workspace.
//   - No native file watch: the sandbox.FS contract has no watch here.
//   - Snapshots and fork are unsupported, as in the reference (the newer
//     API has sandbox snapshots; not used).
//   - A create makes two round trips (the create and the workspace's
//     mkdir), as the reference's createIfNotExists + fs.mkdir; a file
//     write is two (the upload and the command).
//
// The fake in blaxelfake serves both APIs on loopback; TestOfficialSDK
// drives @blaxel/core against it (BL_API_URL, BL_API_KEY, BL_WORKSPACE,
// BL_DISABLE_H2=true, no region). TestLive runs the suites against the
// real Blaxel when BL_API_KEY and BL_WORKSPACE are set.
package blaxel
