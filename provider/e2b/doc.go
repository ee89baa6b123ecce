// Package e2b is corral's provider for E2B (e2b.dev) cloud sandboxes,
// built on the provider kit: provider/cloudhttp for the control plane,
// sandbox/execproc over envd's process service for Exec, Spawn and the
// kill, sandbox/execfs for the file system. It speaks the wire of the
// official e2b npm SDK 2.51.0; provider/e2b/e2bfake is a loopback fake of
// the same wire that the SDK itself accepts (TestOfficialSDK).
//
// # Control plane (https://api.<domain>, header X-API-KEY)
//
//	POST   /v2/sandboxes                  create: templateID, timeout (s), metadata, allow_internet_access, network
//	GET    /v2/sandboxes?metadata=…&state=running,paused   list (paged by X-Next-Token): reconciliation, sandbox ls, prune
//	POST   /v2/sandboxes/{id}/connect     Resume: wakes a paused sandbox, extends (never shortens) its timeout
//	DELETE /sandboxes/{id}                Destroy (404 is success)
//	POST   /sandboxes/{id}/timeout        SetTimeout
//	POST   /sandboxes/{id}/pause          Pause ({"memory": false} keeps the filesystem only)
//	POST   /sandboxes/{id}/snapshots      Snapshot (a template that outlives the sandbox)
//	DELETE /templates/{id}                DeleteSnapshot (404 is success)
//	POST   /sandboxes/{id}/fork           Fork (count 1)
//
// RestoreSnapshot is a create whose templateID is the snapshot id. E2B
// mints sandbox ids, so corral's key (CreateOptions.ID, or a fresh
// corral-<hex>) rides in metadata as corral.key with corral=1: a create
// whose outcome is unknown (a 5xx, a timeout) is reconciled by listing
// that metadata, never repeated into a second sandbox, and Resume takes
// either E2B's id or the key. CreateOptions.Env never reaches envVars or
// metadata: it stays in the handle and travels with each command
// (TestSecretsPerCommand). NetworkDeny is allow_internet_access=false.
// An egress allow-list (CreateOptions.Egress) is E2B's own domain rules:
// network.allowOut the listed names, denyOut ALL_TRAFFIC; E2B matches
// names on ports 80 and 443 only, so a list entry on another port is
// refused at run start (sandbox.NativeEgress, TestEgressTranslated).
//
// # envd (header X-Access-Token, Connect-RPC)
//
// envd is reached at https://sandbox.<domain> with the E2b-Sandbox-Id and
// E2b-Sandbox-Port headers for E2B's own domains (as the SDK 2.51.0 does),
// else https://49983-<id>.<domain>; Options.SandboxURL (the SDK's
// sandboxUrl, E2B_SANDBOX_URL) replaces both. The Go code of the process
// and filesystem services is generated from E2B's protos
// (internal/envd; TestSDKDescriptors checks them against the descriptors
// the SDK embeds). Commands run as Options.User (Basic auth, default
// user):
//
//	process.Process/Start        one server stream per command: start{pid}, data{stdout|stderr}…, end
//	process.Process/Connect      re-attach by pid (Exit after a dropped stream)
//	process.Process/SendInput    stdin, in order, 256 KiB per call
//	process.Process/CloseStdin   EOF with the output still streaming (writableStdin)
//	filesystem.Filesystem/MakeDir, Stat   the workspace at create and resume
//	POST /files (multipart)      SourceDir, every file in one request
//
// # Processes and the kill
//
// envd starts a command in its own process group and its SendSignal
// reaches one pid: a backgrounded grandchild survives it (the fake
// behaves so: TestEnvdKillIsPIDOnly). Every command therefore runs under
// a small sh step that calls setsid when the command does not already
// lead its group (setsid then execs without forking, so envd's pid stays
// the command's), and Kill is execproc's group kill, a kill script run as
// a second command. killableProcesses is claimed because sandboxtest's
// KillMeasured case passes against the fake with envd's one-pid kill; the
// live suite measures it on E2B. A dropped output stream is Unavailable
// for Exec; a spawned process's Wait re-attaches with Connect and gets
// the real exit code (TestDroppedStream, E2B issue 1587: one dead stream
// never stalls the others). An end event that says "signal: NAME" is
// 128+N.
//
// # Files
//
// The file system is sandbox/execfs over the process service, so every
// path passes the shared symlink guard inside the sandbox. envd's GET and
// POST /files follow links without such a guard, so corral uses them only
// where no link can be in the way: SourceDir, written into the fresh
// workspace in one multipart POST (then one command for empty
// directories and executable bits). Cost against the SDK (TestRequestCounts):
// create 2 requests (the SDK 1: corral makes the workspace directory, as
// the reference's files.makeDir did), exec 1 (1), read 1 (1), write 3
// (Start, SendInput, CloseStdin; the SDK 1, unguarded).
//
// # Ports
//
// ConnectPort returns https://<port>-<id>.<domain>, with the
// e2b-traffic-access-token header when the sandbox was created with
// allowPublicTraffic false.
//
// # Differences from the reference (shared/reference/providers.md §4.7)
//
// The workspace defaults to ~/workspace (envd expands ~: /home/user/
// workspace for E2B's user); Kill honours the signal asked for (the
// reference always sent SIGKILL) and reaches backgrounded grandchildren
// through the group kill; files go through the guarded execfs instead of
// envd's unguarded file API; the create and connect calls are the SDK
// 2.51.0's v2 routes. Snapshots have no full|filesystem mode in the API
// the SDK 2.51.0 speaks (SandboxSnapshotRequest has only a name); the
// mode exists for pause (Pause's memory flag).
//
// Capabilities: fs, exec, env, ports, backgroundProcesses,
// writableStdin, killableProcesses (measured), snapshots, networkPolicy,
// durableFilesystem, fork. Not ownProcessTable: an E2B sandbox is a VM
// and would qualify, but it is not claimed until the live suite's
// OwnProcessTable case has run against E2B (the fake's sandboxes are host
// processes, where the claim would be false).
package e2b
