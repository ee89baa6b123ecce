// Package refcloud is the reference cloud provider: the smallest provider
// built on corral's provider kit (provider/cloudhttp for the wire,
// sandbox/execproc for processes, sandbox/execfs for files), speaking the
// loopback protocol below to the fake in refcloud/fake (made with
// internal/fakecloud). It proves the kit: the conformance suites
// and the fault cases run against it across the network. It is not a
// backend anyone runs and it is not registered in the CLI's registry.
//
// # Protocol
//
// JSON over HTTP, every request with "Authorization: Bearer <token>";
// every answer carries X-Request-Id, and an error answer is
// {"message": "...", "status": N}.
//
//	POST   /v1/sandboxes                     {"name","labels"} → 201 Sandbox; 409 when the name is taken
//	GET    /v1/sandboxes/{id}                → 200 Sandbox; 404 when gone
//	GET    /v1/sandboxes?name=N&label=K=V…   → 200 {"sandboxes":[Sandbox…]} (labels ANDed)
//	DELETE /v1/sandboxes/{id}                → 204 (its processes killed, its files gone); 404 when gone
//	GET    /v1/sandboxes/{id}/processes/{pid}        → 200 {"pid","running","exitCode"}; 404 unknown
//	POST   /v1/sandboxes/{id}/processes/{pid}/signal {"signal":N} → 204; 404 unknown
//	GET    /v1/sandboxes/{id}/exec           WebSocket upgrade (below); 404 when gone
//
// A Sandbox is {"id","name","labels","root","createdAt"}: id is opaque,
// name is the create's (unique while the sandbox lives), root is the
// workspace's absolute path. Create has no environment field on purpose:
// secrets (CreateOptions.Env, SetEnv) stay in the handle and travel with
// each command.
//
// The signal endpoint is the backend's native kill; what it reaches is the
// backend's kill semantics (the fake's fakecloud.KillMode): the process
// group, or the one pid.
//
// Exec over the WebSocket, one command per connection:
//
//  1. client → text {"type":"start","argv":[…],"env":["K=V"…],"dir":"/abs","stdin":bool}:
//     argv runs verbatim, in a new session (its pid leads its own group),
//     with env laid over the backend's minimal default environment;
//  2. server → text {"type":"started","pid":N}, or {"type":"error","status":S,"message":M}
//     and the connection closes;
//  3. server → binary frames, first byte 1 (stdout) or 2 (stderr), then
//     the bytes; client → binary frames with first byte 0 (stdin) and
//     text {"type":"eof"} to close stdin while the output keeps flowing;
//  4. server → text {"type":"exit","code":N} once the process exited and
//     both streams reached EOF (128+N for signal N), then a normal close.
//
// A connection that drops before the exit message is a transport failure
// (Unavailable); the exit code can still be read from the processes
// endpoint. Under the fake's KillOnDisconnect mode a dropped connection
// SIGKILLs the process group.
//
// # The provider
//
// Everything that is not the protocol is the kit's: cloudhttp gives auth,
// deadlines, retries of idempotent calls with Retry-After, and Create with
// reconciliation by name (a create whose answer was a 5xx or a timeout is
// looked up with GET /v1/sandboxes?name=…, never repeated into a second
// sandbox); execproc gives Exec, Spawn and Process with the pid-reporting
// wrapper and the kill; execfs gives the file system.
//
// Options.Kill chooses the kill: KillGroup (the default) is execproc's
// group kill, a kill script run as a second command, which reaches
// backgrounded grandchildren, so the provider claims killableProcesses
// (sandboxtest's KillMeasured case passes). KillNativePID is
// execproc.PIDOnly over the signal endpoint; against a pid-only backend a
// grandchild survives it, so killableProcesses is not claimed.
//
// Capabilities: fs, exec, env, backgroundProcesses, writableStdin (the
// EOF message is a real half-close), durableFilesystem (a sandbox's files
// live as long as it does), killableProcesses as above. No ports,
// snapshots, fork or network policy: Snapshot, Fork, RestoreSnapshot,
// DeleteSnapshot and ConnectPort return an UnsupportedCapabilityError.
// Never ownProcessTable: the fake's sandboxes are host processes.
package refcloud
