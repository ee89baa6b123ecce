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

// relayScript is the journaled command. It starts the agent with its stdin
// and stdout on two FIFOs the client holds, in a session and process group
// of its own (setsid, where the sandbox has it) and marked with MarkerEnv,
// and copies what the client writes to a third FIFO to its own stdout,
// which is the journal. When the client closes that FIFO the agent is
// stopped (cr_stop: its whole group and every marked process, SIGTERM then
// SIGKILL) and the relay exits with the code the client left in rc;
// without one, the client went away. A SIGTERM (a cancel's kill) stops the
// agent the same way before the relay exits. $1 is the FIFO directory, $2
// the SIGTERM grace in tenths of a second; the agent's argv follows.
const relayScript = `d=$1 cr_t=$2; shift 2
` + stopFuncs + `if command -v setsid >/dev/null 2>&1; then cr_ss=setsid; else cr_ss=; fi
` + MarkerEnv + `=$d $cr_ss sh -c '` + leaderScript + `' corral-acp-agent "$d" "$@" <"$d/in" >"$d/out" &
a=$!
trap 'cr_stop "$cr_t" group; exit 143' TERM
cat "$d/ev"
cr_stop "$cr_t" group
wait "$a"
if [ -s "$d/rc" ]; then IFS= read -r rc <"$d/rc"; exit "$rc"; fi
echo "corral: the ACP client (the corral process that drove this session) went away; the session is lost" >&2
exit 75
`

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
