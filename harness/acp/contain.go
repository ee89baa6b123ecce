package acp

import (
	"context"
	"strconv"
	"strings"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/d10ffeed/corral/sandbox"
)

// MarkerEnv is the variable that marks the processes of a run's agent: the
// relay starts the agent with MarkerEnv=<the run's private directory>, and
// whatever the agent starts inherits it (a launcher's real agent, a
// background job, a double-forked or setsid daemon), so the relay and the
// client find them all in /proc when the run ends. A process that clears
// its environment escapes the marker but not the process group.
const MarkerEnv = "CORRAL_ACP_RUN"

// stopFuncs are the shell functions that stop a run's agent; $d is the
// run's private directory.
//
// cr_stop GRACE [group] sends SIGTERM to the agent's process group (with
// "group": its leader wrote its pid to $d/agent.pgid) and to every process
// that carries the marker, and SIGKILL to what is left after GRACE tenths
// of a second, repeated until no process carries the marker (at most 100
// rounds, which outlasts a fork bomb that can no longer fork once
// killed). Zombies have no readable environment and do not count.
const stopFuncs = `cr_marked() {
  for cr_f in $(grep -lsxzF "` + MarkerEnv + `=$d" /proc/[0-9]*/environ 2>/dev/null); do
    cr_f=${cr_f#/proc/}; echo "${cr_f%/environ}"
  done
}
cr_sig() {
  [ -n "$cr_g" ] && kill -"$1" -"$cr_g" 2>/dev/null
  cr_ps=$(cr_marked)
  [ -n "$cr_ps" ] && kill -"$1" $cr_ps 2>/dev/null
  [ -n "$cr_ps" ]
}
cr_stop() {
  cr_g=
  [ "$2" = group ] && [ -s "$d/agent.pgid" ] && IFS= read -r cr_g <"$d/agent.pgid"
  if cr_sig TERM; then
    cr_i=0
    while [ "$cr_i" -lt "$1" ] && [ -n "$(cr_marked)" ]; do sleep 0.1; cr_i=$((cr_i+1)); done
  fi
  cr_i=0
  while cr_sig KILL && [ "$cr_i" -lt 100 ]; do cr_i=$((cr_i+1)); done
  return 0
}
`

// leaderScript runs the agent as the leader of its own session and process
// group when setsid made it one (it then records its pid in $1/agent.pgid),
// and execs the agent's argv.
const leaderScript = `d=$1; shift
IFS= read -r s </proc/$$/stat 2>/dev/null && r=${s##*) } && r=${r#* } && r=${r#* } && [ "${r%% *}" = "$$" ] && echo "$$" >"$d/agent.pgid"
exec "$@"`

// relayScript is the journaled command. It starts the agent, in a
// session and process group of its own (setsid, where the sandbox has it)
// and marked with MarkerEnv, with its stdin on the FIFO $d/in and its
// stdout appended to the log $d/out.log (outLog), and copies what the
// client writes to the FIFO $d/ev to its own stdout, which is the journal.
// A holder process keeps $d/in open for writing, so the agent does not
// see the end of its input when a client goes away; the client that ends
// the session kills the holder ($d/hold.pid) to close it. A subshell waits
// for the agent and writes its exit status to $d/agent.exit.
//
// When the client closes $d/ev the relay looks for its exit code in
// $d/rc. With one, the agent is stopped (cr_stop: its whole group and
// every marked process, SIGTERM then SIGKILL) and the relay exits with
// it. Without one, the client went away: the relay creates $d/orphan and
// keeps the agent for up to $3 tenths of a second, until the agent exits
// or a client that takes the session over claims it (renames $d/orphan to
// $d/attach, reattachScript) and opens $d/ev again. Whoever renames
// $d/orphan first wins: the relay gives up by renaming it to
// $d/orphan.gone, then stops the agent and exits 75 with a line on its
// stderr. A SIGTERM (a cancel's kill) stops the agent the same way before
// the relay exits. $1 is the run's private directory, $2 the SIGTERM
// grace in tenths of a second, $3 the orphan wait in tenths; the agent's
// argv follows.
const relayScript = `d=$1 cr_t=$2 cr_w=$3; shift 3
` + stopFuncs + `if command -v setsid >/dev/null 2>&1; then cr_ss=setsid; else cr_ss=; fi
rm -f "$d/orphan" "$d/orphan.gone" "$d/attach" "$d/agent.exit"
echo "$$" >"$d/relay.pid"
: >>"$d/` + outLog + `"
sleep 2147483647 3<>"$d/in" >/dev/null 2>&1 &
cr_h=$!
echo "$cr_h" >"$d/hold.pid"
( ` + MarkerEnv + `=$d $cr_ss sh -c '` + leaderScript + `' corral-acp-agent "$d" "$@" <"$d/in" >>"$d/` + outLog + `"
  echo "$?" >"$d/agent.exit" ) &
a=$!
echo "$a" >"$d/agent.pid"
trap 'kill "$cr_h" 2>/dev/null; cr_stop "$cr_t" group; exit 143' TERM
while :; do
  cat "$d/ev"
  [ -s "$d/rc" ] && break
  : >"$d/orphan"
  cr_i=0
  while [ -e "$d/orphan" ] && [ "$cr_i" -lt "$cr_w" ] && [ ! -e "$d/agent.exit" ]; do sleep 0.1; cr_i=$((cr_i+1)); done
  mv "$d/orphan" "$d/orphan.gone" 2>/dev/null
  [ -e "$d/attach" ] || break
  rm -f "$d/attach"
done
kill "$cr_h" 2>/dev/null
cr_stop "$cr_t" group
wait "$a"
if [ -s "$d/rc" ]; then IFS= read -r rc <"$d/rc"; exit "$rc"; fi
echo "corral: the ACP client (the corral process that drove this session) went away; the session is lost" >&2
exit 75
`

// outLog is the file in the run's private directory that the agent's
// stdout is appended to; clients read it from an offset (outScript).
const outLog = "out.log"

// followSh defines cr_follow PID, used by the output scripts once they
// know the process whose exit ends the agent's output: where tail is GNU
// tail (it takes --pid; BusyBox's refuses it), it execs a tail that
// follows the log from the offset (off, f) by inotify, so a line reaches
// the client as it is written, and that ends once PID is gone and what
// was written until then is passed on (the pid is checked every 50 ms).
// Elsewhere it returns, and the script polls.
const followSh = `cr_follow() {
  tail --pid="$1" -c 0 /dev/null >/dev/null 2>&1 || return 0
  exec tail -s 0.05 --pid="$1" -c +"$((off+1))" -f "$f"
}
`

// pollSh is the output scripts' fallback, after cr_done (0 once no more
// output can come) is defined: it polls the log (every 10ms while the
// agent writes, up to every 100ms when it is quiet), since no tail -f
// waits for a process portably.
const pollSh = `cr_i=0
while :; do
  cr_x=0; cr_done && cr_x=1
  n=$(wc -c <"$f" 2>/dev/null) || n=0
  if [ "$n" -gt "$off" ]; then
    tail -c +"$((off+1))" "$f" | head -c "$((n-off))" || exit 1
    off=$n cr_i=0
  elif [ "$cr_x" = 1 ]; then exit 0
  elif [ "$cr_i" -lt 20 ]; then sleep 0.01; cr_i=$((cr_i+1))
  else sleep 0.1
  fi
done`

// outScript follows the agent's output log from byte offset $2 ($1 the
// run's private directory) until the agent has exited (or the relay,
// killed, is gone) and everything it wrote was passed on: by GNU tail
// where the relay has recorded the agent's pid (agent.pid: the subshell
// that waits for it), else by polling.
const outScript = `d=$1 off=$2 f=$1/` + outLog + ` cr_r=
` + followSh + `[ ! -e "$d/agent.exit" ] && [ -s "$d/agent.pid" ] && IFS= read -r cr_a <"$d/agent.pid" && [ -n "$cr_a" ] && cr_follow "$cr_a"
cr_done() {
  [ -z "$cr_r" ] && [ -s "$d/relay.pid" ] && IFS= read -r cr_r <"$d/relay.pid"
  [ -e "$d/agent.exit" ] || { [ -n "$cr_r" ] && ! kill -0 "$cr_r" 2>/dev/null; }
}
` + pollSh

// inScript writes the client's requests and answers to the agent's stdin.
const inScript = `exec cat >"$1"`

// evScript writes the client's records to the relay. Opening the FIFO
// waits for the relay to read it: a client that takes a session over
// starts it only once it claimed the session, after which the relay opens
// the FIFO (a write-only open that did not wait could close before the
// relay opened it, and what it wrote would be lost with the pipe).
const evScript = `exec cat >"$1"`

// reattachScript claims an orphaned session for a client that takes it
// over ($1 the run's private directory): it exits 0 when this client
// claimed it, 3 when the relay has given up (or the run ended), 4 when no
// client has gone away yet (the session's client still lives, or the
// relay has not noticed yet).
const reattachScript = `d=$1
mv "$d/orphan" "$d/attach" 2>/dev/null && exit 0
{ [ -e "$d/orphan.gone" ] || [ -s "$d/rc" ] || [ ! -e "$d/hold.pid" ]; } && exit 3
exit 4`

// releaseScript lets the relay give up an orphaned session at once ($1 the
// run's private directory): a client that finds it cannot take the
// session over.
const releaseScript = `mv "$1/orphan" "$1/orphan.gone" 2>/dev/null; exit 0`

// closeInScript closes the agent's stdin for good ($1 the run's private
// directory): it kills the holder process.
const closeInScript = `[ -s "$1/hold.pid" ] && IFS= read -r p <"$1/hold.pid" && kill "$p" 2>/dev/null; exit 0`

// sweepScript stops whatever still carries the run's marker ($1 the run's
// private directory, $2 the grace in tenths of a second): the client runs
// it after the relay ended, for a relay that was killed before it could.
const sweepScript = `d=$1
` + stopFuncs + `cr_stop "$2"
`

// tenths is a grace in tenths of a second, at least one.
func tenths(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+99*time.Millisecond)/(100*time.Millisecond))))
}

// sweep stops every process of the agent that is still alive.
func (s *session) sweep(ctx context.Context) {
	res, err := s.hd.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", sweepScript, "corral-acp-sweep", s.req.RunDir, tenths(s.h.opts.KillGrace)}})
	switch {
	case err != nil:
		s.log.Warn("acp: stopping the agent's processes failed", "err", err)
	case res.ExitCode != 0:
		s.log.Warn("acp: stopping the agent's processes failed", "exit", res.ExitCode, "stderr", strings.TrimSpace(string(res.Stderr)))
	}
}

// Interrupt asks the agent of a run this process drives to end its turn
// (ACP session/cancel) and waits up to Options.CancelGrace (or until ctx
// ends) for the agent to answer the prompt. When it did, Interrupt then
// waits for the session's teardown (the agent's exit, the journal's last
// records, the relay's exit code; bounded by ExitGrace and ctx) and
// reports true: the run's journal then ends by itself, and the runner
// kills nothing. It reports false when the agent did not end its turn
// within the grace, when this process holds no session for the run, or
// when the prompt was not sent yet; the runner then kills the run's
// processes.
func (h *Harness) Interrupt(ctx context.Context, runID string) bool {
	h.mu.Lock()
	s := h.sessions[runID]
	h.mu.Unlock()
	if s == nil {
		return false
	}
	return s.interrupt(ctx, h.opts.CancelGrace)
}

func (s *session) interrupt(ctx context.Context, grace time.Duration) bool {
	sid, _ := s.sid.Load().(acpsdk.SessionId)
	if sid == "" {
		return false
	}
	gctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	_ = s.jw.write(record{Kind: recCancel})
	s.cancelOnce.Do(func() { close(s.cancelling) })
	if err := s.conn.Cancel(gctx, acpsdk.CancelNotification{SessionId: sid}); err != nil {
		s.log.Debug("acp: session/cancel failed", "err", err)
	}
	select {
	case <-s.turnDone:
	case <-gctx.Done():
		s.log.Debug("acp: the agent did not end its turn within the cancel grace", "grace", grace)
		return false
	}
	select {
	case <-s.done:
		return true
	case <-ctx.Done():
		return false
	}
}
