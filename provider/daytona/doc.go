// Package daytona is corral's provider for Daytona sandboxes, over
// Daytona's REST control plane and the toolbox each sandbox serves
// (provider/cloudhttp for the wire, sandbox/execproc for processes,
// sandbox/execfs for files). Its fake, speaking the same wire format, is
// daytonafake; testdata/sdkcheck.js drives the official @daytonaio/sdk
// against that fake.
//
// # Control plane (Authorization: Bearer DAYTONA_API_KEY; DAYTONA_API_URL)
//
//	POST   /sandbox                       create: name (the sandbox key, or a
//	                                      digest-suffixed name that fits), labels
//	                                      (corral=1, corral-key=<key>, the caller's),
//	                                      snapshot, target, autoStopInterval,
//	                                      autoDeleteInterval 0 for ephemeral,
//	                                      networkBlockAll for a deny policy, env {}
//	GET    /sandbox/{idOrName}            resume, and create's reconciliation by name
//	POST   /sandbox/{id}/start            resume of a stopped, archived or paused sandbox
//	DELETE /sandbox/{id}                  destroy (404 is success)
//	GET    /sandbox?labels={"corral":"1"} list (cursor pages), prune by age
//	POST   /sandbox/{id}/snapshot         Snapshot {name}, polled until not "snapshotting";
//	                                      RestoreSnapshot is a create from it
//	GET    /snapshots/{name}              DeleteSnapshot: the name resolved to the id,
//	DELETE /snapshots/{id}                then deleted by id (the API takes no name there)
//	GET    /sandbox/{id}/ports/{p}/preview-url   ConnectPort (token as x-daytona-preview-token)
//
// A sandbox in state destroyed, destroying, error or build_failed is
// NotFound. Errors go through cloudhttp's table: 401/403 PermissionDenied,
// 404 NotFound, 429 ResourceExhausted after Retry-After, with Daytona's
// message and request id, never the key.
//
// # Toolbox (toolboxProxyUrl + "/" + id, the same Bearer)
//
// Exec, and the provider's own commands (the file system's, the kill
// script), run with the synchronous session exec: POST
// /process/session/{s}/exec {command, runAsync: false} with
// X-Daytona-Split-Output: true, one request whose answer holds the exit
// code and the log labelled with 3-byte markers (01 01 01 stdout, 02 02 02
// stderr), split here (the daemon splits it into stdout and stderr fields
// only for an SDK client from 0.167.0 on; corral names no SDK version). The
// session comes from a small pool per handle (at most 4 idle): a session
// runs its commands one after the other, so concurrent commands take
// different sessions, and a session whose shell holds another environment
// is never taken. A fresh session costs one POST /process/session more.
// A command whose caller gives up before the answer reports a stand-in pid;
// the kill resolves it through the session's pid file, which the launcher
// writes with a per-command token (one file per session, holding no
// secret), and kills the group.
//
// Spawn runs in a session of its own: POST /process/session, POST
// …/exec {runAsync: true}, the log over a WebSocket
// (…/command/{c}/logs?follow=true, closed normally at the end), GET
// …/command/{c} for the exit code, DELETE the session. Every command is
// "setsid sh -c <launcher> …": the daemon sources a session command in the
// session's shell, so without setsid it would not lead a process group and
// a group kill would miss backgrounded grandchildren. The kill is
// execproc's group kill (a kill script run as a second command);
// killableProcesses is claimed because sandboxtest's KillMeasured passes
// against the fake, whose sessions are real shells that source commands as
// the daemon does.
//
// Environment (CreateOptions.Env, SetEnv, Command.Env) never stands in the
// command text (which the daemon keeps in its session directory) nor in
// create's env: for a pooled session it travels once, as a file through
// POST /files/bulk-upload, that the session's shell sources and removes in
// the session's first command, so the values live in that shell's memory
// only (a SetEnv, or a command's own Env, makes the command take a session
// holding exactly its environment); for a spawned command the launcher
// sources and removes it before the command starts. An Exec's stdin likewise
// travels as uploaded parts of at most 512 KiB, joined, opened and removed
// before the command runs: a session command's own input never reaches EOF
// for an async command. For the same reason writableStdin is false: a
// spawned command reads /dev/null and its Stdin is unsupported (Daytona's
// input endpoint cannot close stdin).
//
// Files are exec-backed (sandbox/execfs) through the same commands, except
// ReadFile and WriteFile: one POST /files/bulk-download or
// /files/bulk-upload each (NotFound and "is a directory" come from the
// download's error part; the upload makes missing parents 0755, as the
// daemon's does, and truncates a file it replaces in place rather than
// renaming a new one over it). The path rules (sandbox.CleanPath,
// sandbox.MapPath) are checked first. The daemon follows symbolic links,
// so the link guard stays exec-backed (a Stat before the download;
// execfs's WriteFile), and is taken only while a link could stand in the
// workspace: once the handle started a command, or for a handle that
// resumed a sandbox or restored a snapshot. Commands another handle runs
// in the same sandbox are not seen: a link one of them makes is followed
// by a handle that made the sandbox and ran nothing yet. The workspace
// root is Options.Workdir or "<GET /work-dir>/workspace"
// (/home/daytona/workspace on Daytona's images; the create answer does not
// carry the work dir); it is not made at create: every command's launcher
// makes it when missing, and an upload makes it as a parent.
//
// # Differences from the reference
//
// The reference used process/execute (one combined output, stderr always
// empty) and killed by only stopping its poll (killable false); it wrote
// env to a file it left in the workspace. Here stdout and stderr are kept
// apart, the kill reaches the group, and the env file is removed before
// the command runs. Capabilities: fs, exec, env, ports, backgroundProcesses,
// killableProcesses, snapshots, networkPolicy (networkBlockAll),
// durableFilesystem; not writableStdin, fork or ownProcessTable (the fake's
// sandboxes are host processes; Daytona's are containers, unmeasured here).
// An egress allow-list (CreateOptions.Egress) is Daytona's own firewall:
// IPv4 entries become networkAllowList (/32 CIDRs, at most 5), names and
// *. wildcards domainAllowList; the lists have no ports, so an entry with
// a port (or an IPv6 address) is refused at run start (sandbox.NativeEgress,
// TestEgressTranslated; the fake checks the lists' form, enforces nothing).
//
// Known gap, to be settled by the live suite: the real daemon labels
// output line by line through a shell read loop (a last line without a
// newline gains one, NUL bytes are lost); the fake labels chunks
// byte-exact. Requests per operation against the SDK's
// (TestRequestCounts): create 2 vs 1 (1 with Options.Workdir set), exec
// 1 vs 1 on a pooled session (2 when it needs a new session, 3 with an
// environment to upload), write and read 1 vs 1 (2 once a link could
// stand in the workspace); the SDK's executeCommand (process/execute)
// combines stdout and stderr, so corral's exec is compared with the
// session exec that keeps them apart, also one request.
package daytona
