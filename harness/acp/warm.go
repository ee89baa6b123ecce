package acp

// Warm sessions (option warm=true): the thread's agent process is kept
// running in the sandbox between the thread's runs, and a next turn sends
// it only session/prompt. See the package documentation ("Warm
// sessions").

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// OptWarm is the option that keeps the thread's agent process running
// between its runs ("true"; default "false").
const OptWarm = harness.OptWarm

// WarmDirPrefix begins the name of a thread's keeper directory, beside the
// run journals (path.Dir of Request.RunDir).
const WarmDirPrefix = "acp-warm-"

// Warm reports whether the options ask for a warm session
// (harness.Warmer): the runner then gives the turn no per-run agent tools,
// which the kept agent would still hold after the run.
func (*Harness) Warm(options map[string]string) bool { return harness.WarmOption(options) }

var _ harness.Warmer = (*Harness)(nil)

// warmState is a warm turn's keeper, as Prepare found or started it.
type warmState struct {
	dir   string // the keeper directory
	pid   string // the keeper's pid (the leader of its session)
	found bool   // the keeper already has the turn's session: no initialize, no session/new or load
}

// ensureScript checks the thread's keeper and starts a new one when it
// cannot serve the turn; it also makes the run's journal FIFO. Args: the
// keeper directory, the turn's digest, the session the turn asks for (or
// ""), the run's private directory, then the agent's argv (its
// environment is the Exec's). Prints "busy" or "unsupported" (the turn
// runs cold), "off N" and "warm PID" for a live idle keeper of the same
// digest that holds the session (N the size of its output log), or
// "started PID" for a new one.
//
// The keeper is a shell under setsid (the leader of its own session and
// process group, so a run's process-scope kill does not reach it), marked
// with MarkerEnv=<keeper directory>, that opens the FIFO in read-write
// (so no writer's close is the agent's end of input), runs the agent on
// it with its stdout appended to out.log and its stderr to err, and
// records the agent's pid in agent.pid and its exit status in agent.exit.
// The agent is the keeper's child, reaped by it the moment it exits, so
// its pid is what a follower waits on (the keeper's own parent is often a
// container's init, which may not reap it).
const ensureScript = harness.WarmAliveSh + `d=$1 dg=$2 ses=$3 r=$4; shift 4
( umask 077 && mkdir -p "$r" && cd "$r" && rm -f in ev rc stop orphan orphan.gone attach && mkfifo ev ) || exit 1
warm_extra() { [ -n "$ses" ] && [ "$(cat "$d/session" 2>/dev/null)" = "$ses" ] && [ ! -e "$d/agent.exit" ] && printf 'off %s\n' "$(wc -c <"$d/` + outLog + `")"; }
` + harness.WarmCheckSh + stopFuncs + `cr_stop 5
rm -f "$d/in" "$d/` + outLog + `" "$d/err" "$d/session" "$d/agent.exit" "$d/agent.pid" "$d/agent.pgid"
mkfifo "$d/in" && : >"$d/` + outLog + `" || exit 1
printf '%s\n' "$dg" >"$d/digest"
` + MarkerEnv + `=$d setsid sh -c 'd=$1; shift; exec 3<>"$d/in"; "$@" <&3 >>"$d/` + outLog + `" 2>>"$d/err" & echo "$!" >"$d/agent.pid"; wait "$!"; echo "$?" >"$d/agent.exit"' corral-acp-keeper "$d" "$@" </dev/null >/dev/null 2>&1 &
p=$!
echo "$p" >"$d/pid"
echo "$p" >"$d/agent.pgid"
echo "started $p"
`

// warmOutScript follows the keeper's output log from byte offset $3 ($1
// the keeper directory, $2 the keeper's pid) until the agent has exited
// (or its keeper is gone) and everything it wrote was passed on, by GNU
// tail or polling as outScript does. The client's teardown ends it at the
// end of the turn.
const warmOutScript = harness.WarmAliveSh + `d=$1 kp=$2 off=$3 f=$1/` + outLog + `
` + followSh + `[ ! -e "$d/agent.exit" ] && alive "$kp" && [ -s "$d/agent.pid" ] && IFS= read -r cr_a <"$d/agent.pid" && [ -n "$cr_a" ] && cr_follow "$cr_a"
cr_done() { [ -e "$d/agent.exit" ] || ! alive "$kp"; }
` + pollSh

// warmRelayScript is a warm turn's journaled command: the relay attached
// to the kept agent. It marks the keeper busy with its pid, copies what
// the client writes to the run's FIFO $r/ev to its stdout (the journal)
// and exits with the client's code from $r/rc. It starts no agent and
// leaves the keeper running, except when the client asks it to stop it
// ($r/stop: the turn failed or was cancelled), and on SIGTERM (a cancel's
// kill): then the keeper's whole session and every process marked with
// its directory is stopped (cr_stop), so nothing of the turn survives.
// When the client goes away without a code, the relay keeps the session
// for a client that takes it over as the cold relay does ($r/orphan,
// claimed by renaming it to $r/attach) for up to $5 tenths of a second
// while the keeper lives; when nobody does, it stops the keeper (no other
// client can know where its turn is) and exits 75. $1 the keeper
// directory, $2 the run's private directory, $3 the keeper's pid, $4 the
// SIGTERM grace in tenths of a second, $5 the orphan wait in tenths.
const warmRelayScript = harness.WarmAliveSh + `d=$1 r=$2 kp=$3 cr_t=$4 cr_w=$5
` + stopFuncs + `cr_end() { cr_stop "$cr_t" group; rm -f "$d/pid"; }
echo "$$" >"$d/busy"
trap 'cr_end; rm -f "$d/busy"; exit 143' TERM
if [ "$(cat "$d/pid" 2>/dev/null)" != "$kp" ] || ! alive "$kp"; then echo "corral: the warm ACP agent $kp is gone" >&2; fi
while :; do
  cat "$r/ev"
  [ -s "$r/rc" ] && break
  : >"$r/orphan"
  cr_i=0
  while [ -e "$r/orphan" ] && [ "$cr_i" -lt "$cr_w" ] && alive "$kp"; do sleep 0.1; cr_i=$((cr_i+1)); done
  mv "$r/orphan" "$r/orphan.gone" 2>/dev/null
  [ -e "$r/attach" ] || break
  rm -f "$r/attach"
done
if [ -s "$r/rc" ]; then
  IFS= read -r rc <"$r/rc"
  [ -e "$r/stop" ] && cr_end
  rm -f "$d/busy"
  exit "$rc"
fi
cr_end
rm -f "$d/busy"
echo "corral: the ACP client (the corral process that drove this warm session) went away; the agent was stopped and the session is lost" >&2
exit 75
`

// warmDigest digests what is baked into a kept agent at its start: its
// argv and environment, and what its session was made with (the MCP
// servers, their secrets expanded; the cwd; the authentication method,
// model and mode the session was set up with).
func warmDigest(req harness.Request, servers []sandbox.MCPServer) string {
	mcp, _ := json.Marshal(servers)
	return harness.WarmDigest(req.Args, req.Env, "mcp:"+string(mcp), "cwd:"+req.WorkspaceRoot,
		"auth:"+req.Options[OptionAuthMethod], "model:"+req.Model, "mode:"+req.Mode)
}

// prepareWarm finds or starts the thread's keeper; ok false means the
// turn runs cold (no thread, a keeper busy with another turn, a sandbox
// without setsid or mkfifo). off is where the turn's output starts in the
// keeper's log.
func (h *Harness) prepareWarm(ctx context.Context, hd sandbox.Handle, req harness.Request, servers []sandbox.MCPServer) (w *warmState, off int64, ok bool, err error) {
	const op = "harness.acp.warm"
	if req.ThreadID == "" {
		return nil, 0, false, nil
	}
	dir := harness.WarmDir(req, WarmDirPrefix)
	args := append([]string{"sh", "-c", ensureScript, "corral-acp-warm", dir, warmDigest(req, servers), req.Session, req.RunDir}, req.Args...)
	res, err := hd.Exec(ctx, sandbox.Command{Args: args, Env: req.Env})
	if err != nil {
		return nil, 0, false, sandbox.Wrap(sandbox.Internal, op, req.RunID, err)
	}
	if res.ExitCode != 0 {
		return nil, 0, false, sandbox.Errorf(sandbox.Internal, op, req.RunID, "starting the warm ACP agent exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	out := res.Stdout
	if rest, ok := bytes.CutPrefix(out, []byte("off ")); ok {
		n, tail, _ := bytes.Cut(rest, []byte("\n"))
		if off, err = strconv.ParseInt(string(bytes.TrimSpace(n)), 10, 64); err != nil || off < 0 {
			return nil, 0, false, sandbox.Errorf(sandbox.Internal, op, req.RunID, "the warm ACP agent check printed %q", res.Stdout)
		}
		out = tail
	}
	pid, started, ok, err := harness.ParseWarmCheck(out)
	if err != nil {
		return nil, 0, false, sandbox.Wrap(sandbox.Internal, op, req.RunID, err)
	}
	if !ok {
		h.opts.Logger.Debug("acp: the warm agent cannot serve the turn; it runs cold", "run", req.RunID, "check", strings.TrimSpace(string(res.Stdout)))
		return nil, 0, false, nil
	}
	if started {
		off = 0
	}
	return &warmState{dir: dir, pid: strconv.Itoa(pid), found: !started}, off, true, nil
}

// warmRelay is a warm turn's journaled command.
func (h *Harness) warmRelay(req harness.Request, w *warmState, orphanTenths string) sandbox.Command {
	return sandbox.Command{Args: []string{"sh", "-c", warmRelayScript, "corral-acp-warm-relay", w.dir, req.RunDir, w.pid, tenths(h.opts.KillGrace), orphanTenths}}
}

// rememberSession records, in the keeper directory, the session a new
// keeper now holds, so the thread's next turn (which asks for it) finds
// it warm.
func (s *session) rememberSession(ctx context.Context, sid string) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := harness.WriteFile(ctx, s.hd, s.warm.dir+"/session", []byte(sid+"\n"), "600"); err != nil {
		s.log.Warn("acp: recording the warm agent's session failed; the next turn starts cold", "err", err)
	}
}

// idBase returns the offset a warm turn's client adds to its JSON-RPC
// request ids, so that they cannot collide with those of the clients
// that spoke to the kept agent before it: microseconds since the epoch
// (well inside a JSON number's exact range) — every client numbers its
// requests from 1.
func idBase() uint64 { return uint64(time.Now().UnixMicro()) }

// rewriteID shifts the id of a JSON-RPC request (a message with a method
// and an id) by base; it returns b itself when b is not one.
func rewriteID(b []byte, base uint64) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil || len(m["method"]) == 0 || len(m["id"]) == 0 {
		return b
	}
	id, err := strconv.ParseUint(string(m["id"]), 10, 64)
	if err != nil {
		return b
	}
	m["id"] = json.RawMessage(strconv.FormatUint(id+base, 10))
	out, err := json.Marshal(m)
	if err != nil {
		return b
	}
	if len(b) > 0 && b[len(b)-1] == '\n' {
		out = append(out, '\n')
	}
	return out
}

// unshiftID undoes rewriteID on the agent's answer to one of this
// client's requests (a message with an id and no method); an id below
// base is not this client's and is left as it is.
func unshiftID(line []byte, base uint64) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil || len(m["method"]) != 0 || len(m["id"]) == 0 {
		return line
	}
	id, err := strconv.ParseUint(string(m["id"]), 10, 64)
	if err != nil || id < base {
		return line
	}
	m["id"] = json.RawMessage(strconv.FormatUint(id-base, 10))
	out, err := json.Marshal(m)
	if err != nil {
		return line
	}
	return append(out, '\n')
}
