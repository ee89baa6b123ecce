// Package acp is the harness for any Agent Client Protocol agent over
// stdio (harness name "acp"; the agent's command is Request.Args). It is
// an ACP client built on github.com/coder/acp-go-sdk.
//
// # How an ACP run is journaled
//
// ACP is two-way JSON-RPC on the agent's stdin and stdout, so unlike the
// NDJSON harnesses the agent's stdout cannot simply be redirected into the
// journal: the client must read it and answer on its stdin. Prepare
// therefore returns a relay, not the agent, as the journaled command:
//
//	sandbox                                       host (this package)
//	relay (journaled: stdout → journal)
//	  agent  <in  FIFO  <──── cat >in  ◀──────── ACP client writes requests, answers
//	         >>out.log  ────> outScript (from an offset) ──▶ ACP client reads; session/update → record
//	  cat ev FIFO → journal  <── cat >ev ◀────── one JSON record per line
//
// Prepare makes the two FIFOs in Request.RunDir, spawns the three helper
// processes (which needs a provider with writableStdin), starts the client
// in a goroutine and returns the relay. The relay starts the agent on the
// in/out FIFOs and copies the ev FIFO to its stdout, which the journal
// wrapper appends to the run's journal. The client writes a record for
// every session/update (the notification's params as the agent sent them,
// in the agent's order, before the SDK dispatches them) and for every
// decision it makes: permission answers, file writes and terminals (with
// their policy gate and approval id), terminal output, the session id, the
// prompt's stop reason, and finally an end (or error) record. Then it
// writes the relay's exit code to RunDir/rc and closes the ev FIFO; the
// relay stops the agent and exits with that code, and the journal wrapper
// writes its sentinel. Records are redacted of the workspace's secret
// values; MCP server headers and environments never reach the journal.
//
// # What durable means for ACP
//
// The agent process lives in the sandbox, but its ACP session is held by
// the client, and the client's stdio to the agent dies with the process
// that runs it. So:
//
//   - Everything journaled survives that process: any corral process can
//     attach, replay the journal and deliver the events exactly once, as
//     for every harness. The translator is pure over the records.
//   - A detached driver does not end the session: the client runs in the
//     process that prepared the run (not the driver), so a run detached in
//     a long-lived process (a daemon) goes on and can be attached again.
//   - When that process goes away mid-turn, the agent goes on: its stdin
//     FIFO is held open by a holder process, its stdout is appended to
//     RunDir/out.log, and the relay marks the session orphaned and keeps
//     it for Options.ReattachWait (option reattachWait). The process that
//     takes the run over calls Harness.Reattach (harness.Reattacher): it
//     claims the session and a new client goes on with the same turn from
//     what the journal holds — the prompt's JSON-RPC id and the
//     permission requests in flight (rpc records), the output offset past
//     the last line journaled, a waiting request's deadline (until) — so
//     a request that waited is answered through any replica or by what
//     is left of its deadline, and the prompt's answer ends the run.
//     Terminals the dead client started are not carried over.
//   - When nobody takes the session over in time, or the agent exits
//     while orphaned, the relay stops the agent and exits 75 with a line
//     on its stderr, and the journal ends without an end record. Whoever
//     drives the run then finishes it with RUN_ERROR code
//     "acp-session-lost". The session itself is not lost to the agent:
//     the thread's next run asks for it with session/load (its id is in
//     the session.started event), and falls back to a new session with a
//     session.not_resumed event when the agent cannot load it.
//   - Cancel: when this process holds the session, the runner first has
//     the client send session/cancel (Harness.Interrupt) and gives the
//     agent Options.CancelGrace to end its turn. An agent that does is not
//     killed: the session tears down as at the end of any turn (the agent's
//     stdin closes and it gets Options.ExitGrace to exit) and the relay
//     exits with the client's code. Only an agent that does not end its
//     turn in time (or a session this process does not hold) has the
//     journaled process tree killed, as for any run.
//
// # Warm sessions
//
// With option warm=true (OptWarm) the thread's agent process is kept
// running in the sandbox between the thread's runs (warm.go), and a next
// turn skips the agent's start, initialize and session/new or load:
//
//   - The keeper. Prepare (one exec through the handle, not under a run's
//     journal wrapper, so a run's process-scope kill does not reach it)
//     starts the agent under setsid in the thread's keeper directory
//     (harness.WarmDir with prefix WarmDirPrefix, beside the journals,
//     0700), marked with MarkerEnv=<that directory>: its stdin a FIFO the
//     keeper holds open read-write, its stdout appended to out.log. The
//     directory records its pid, a digest of what is baked into it (argv,
//     environment with secrets hashed, MCP servers with secrets expanded,
//     cwd, authMethod, model and mode) and the ACP session it holds.
//   - The turn. The journaled command is a relay attached to the kept
//     agent (warmRelayScript): it starts no agent, marks the keeper busy
//     and copies the client's records to the journal, as the cold relay
//     does. The client reads the agent's log from its size at Prepare and
//     writes its FIFO. When the keeper already holds the turn's session
//     (Request.Session) the client sends session/prompt only (the session
//     record says warm "kept"); a new keeper is initialized and loads (or
//     starts) the session as a cold turn does (warm "started"). Its
//     JSON-RPC request ids are shifted by a per-client base (microseconds
//     since the epoch), so they never collide with an earlier client's.
//     The end of the turn leaves the agent running.
//   - Takeover: the relay keeps an orphaned warm session for reattachWait
//     as the cold relay does; Reattach finds the keeper in the journal's
//     client record and attaches a new client to the same kept agent.
//     When nobody does, the relay stops the keeper and exits 75
//     (acp-session-lost), and the thread's next turn is cold.
//   - Cancel: session/cancel first. A warm turn that was cancelled, or
//     failed, has the relay stop the keeper ($RunDir/stop); an agent that
//     does not end its turn within CancelGrace gets the relay killed,
//     whose SIGTERM trap stops the keeper's whole session and every
//     process marked with its directory. Nothing of the turn survives;
//     the next turn is cold.
//   - Fallback: no live keeper (a zombie is dead), a digest or session
//     that differs, or a relay that died mid-turn (the busy file names a
//     dead pid): Prepare stops what is left (its session and its marked
//     processes) and starts a new keeper, which loads the thread's
//     session with session/load. A keeper busy with another live turn of
//     the thread, no thread, or a sandbox without setsid or mkfifo runs
//     the turn cold.
//
// The policy and approvals stay per turn (the client answers every
// request); MCP servers, model and mode are baked into the session, and a
// change starts a new keeper. Runs of a warm session get no per-run
// agent tools from the runner (harness.Warmer).
//
// # Containment
//
// The relay starts the agent in a session and process group of its own
// (setsid, where the sandbox has it) and marks it with MarkerEnv, which
// everything the agent starts inherits. When the run ends, when the
// client goes away, and when the relay is sent SIGTERM (a cancel), the
// relay stops the whole group and every process that carries the marker —
// a launcher's real agent (npm's launchers fork the native agent), its
// background jobs, double-forked and setsid daemons — with SIGTERM, then
// SIGKILL after Options.KillGrace, until none is left; the client sweeps
// the marker once more after the relay ended. A process that both leaves
// the group and clears its environment is not found.
//   - Harness.Close ends this process's sessions with a recorded error
//     ("acp-client-closed"), so their runs finish instead of waiting.
//
// # Protocol duties
//
// The client initializes with protocol version 1 and file system and
// terminal capabilities, refuses an agent with a newer protocol,
// authenticates when Options["authMethod"] names an advertised method,
// loads Request.Session when the agent can (history replayed by the load is
// not journaled) or starts a new session with cwd = Request.WorkspaceRoot,
// and sends the prompt as one text block.
//
// Permission requests are answered from Request.Policy (no policy allows
// everything, as for every harness): execute is a
// command (the command text from the tool call's raw input: "command",
// "cmd" or an argv; a shell's -c script is the command), edit, delete and
// move are file writes, fetch is network, read, search, think and
// switch_mode are not gated, and anything else is a tool named by its
// title. Allow picks the agent's allow_once (or allow_always) option, deny
// its reject_once (or reject_always); ask rejects the call for this turn
// and emits approval.requested with the approval id sandbox.ApprovalID
// ("acp", kind, target). Answers given for approval ids come back in
// Request.Approvals (approval id → allowed). With approvalWait (the option
// or Options.ApprovalWait) an ask waits instead, with the turn, for a live
// answer in the run's harness.AnswersFile (run.Runner.Answer; events
// approval.waiting, then approval.answered), and its deadline decides by
// the policy's default. The same gates apply
// to fs/write_text_file (the fileWrite rule) and terminal/create (the
// command rules), so an agent that skips the permission request is held
// to the policy all the same. What the agent does with its own tools
// never reaches corral: UnenforcedRules reports every deny and ask rule of
// the policy as enforced only at this boundary, and the run opens with a
// policy.unenforced event saying so.
//
// fs/read_text_file and fs/write_text_file use the sandbox's workspace
// file system (paths outside the workspace are refused); terminal/create
// spawns the command in the sandbox, and terminal output, wait_for_exit,
// kill and release act on it. MCP servers are the
// workspace's (Request.MCPServers, secret references expanded); remote
// ones are sent only when the agent advertises their transport. Skills are
// not projected: ACP has no skill setting, and each agent looks for them
// in its own place (an agent that reads the workspace's .claude/skills or
// AGENTS.md finds what the workspace holds).
//
// # Events
//
// agent_message_chunk → TEXT_MESSAGE_*; agent_thought_chunk → REASONING_*;
// tool_call and tool_call_update → TOOL_CALL_START (named by the tool's
// kind), one TOOL_CALL_ARGS (the raw input with the title) and
// TOOL_CALL_END once the input is final — not while the call is pending,
// whose input may still stream ({} or {"cwd":…} at first), but when it
// is asked about, leaves pending or ends — and TOOL_CALL_RESULT when the call
// completes or fails (raw output, else its text and terminal output, else
// its other content as JSON); plan → CUSTOM acp.plan; non-text message
// blocks → CUSTOM acp.message_content; the session → session.started. A
// turn that ends in refusal or cancelled is a RUN_ERROR; max_tokens and
// max_turn_requests finish the run after a CUSTOM acp.stop.
package acp
