package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// claimScript looks at, or claims, the orphaned session of a run ($1 its
// private directory) for a client that takes it over. $2 is "check" (only
// look), "attach" (claim it: the relay waits for this client) or
// "orphan.gone" (release it: the relay gives up at once). It exits 0 when
// the session is orphaned (check) or this client renamed it, 3 when the
// relay has given up, the run ended or another client claimed it, and 4
// when no client has gone away yet (the client may still live in another
// process, or the relay has not noticed yet).
const claimScript = `d=$1
if [ -e "$d/orphan" ]; then
  [ "$2" = check ] && exit 0
  mv "$d/orphan" "$d/$2" 2>/dev/null && exit 0
  exit 3
fi
{ [ -e "$d/orphan.gone" ] || [ -e "$d/attach" ] || [ -s "$d/rc" ] || [ -e "$d/agent.exit" ]; } && exit 3
exit 4`

// claimPoll is how often Reattach looks whether the relay noticed that the
// previous client went away.
const claimPoll = 100 * time.Millisecond

var _ harness.Reattacher = (*Harness)(nil)

// Reattach takes over, in this process, the ACP session of a run whose
// client went away mid-turn (the corral process that drove it died): the
// runner calls it when it takes a run over. It returns at once; in the
// background it waits (up to Options.ClaimWait) for the relay to report
// the client gone, rebuilds from the run's journal what the turn has in
// flight — the session, the prompt's JSON-RPC id, permission requests not
// answered, the deadlines of those that wait — and claims the session: a
// new client reads the agent's output from where the journal ends, answers
// the pending requests (a waiting one by the answers file or its
// deadline), and ends the run with the prompt's answer as the first client
// would have. A run whose prompt was not sent yet is released: the relay
// ends it with acp-session-lost at once. Nothing happens when this process
// drives the session already, when its client still lives elsewhere, or
// when the turn ended.
func (h *Harness) Reattach(ctx context.Context, hd sandbox.Handle, req harness.Request) error {
	if req.RunDir == "" || req.Journal == "" {
		return nil
	}
	h.mu.Lock()
	if h.sessions[req.RunID] != nil || h.base.Err() != nil {
		h.mu.Unlock()
		return nil
	}
	base := h.base
	h.wg.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.wg.Done()
		if err := h.reattach(base, hd, req); err != nil {
			h.opts.Logger.Warn("acp: taking the session over failed", "run", req.RunID, "err", err)
		}
	}()
	return nil
}

// claim runs claimScript and returns its exit code.
func claim(ctx context.Context, hd sandbox.Handle, dir, how string) (int, error) {
	res, err := hd.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", claimScript, "corral-acp-claim", dir, how}})
	if err != nil {
		return 0, err
	}
	return res.ExitCode, nil
}

func (h *Harness) reattach(base context.Context, hd sandbox.Handle, req harness.Request) error {
	ctx, cancel := context.WithTimeout(base, h.opts.ClaimWait)
	defer cancel()
	for {
		code, err := claim(ctx, hd, req.RunDir, "check")
		if err != nil {
			return err
		}
		if code == 0 {
			break
		}
		if code != 4 {
			return nil // gone, ended, or someone else's
		}
		select {
		case <-ctx.Done():
			return nil // the client still lives elsewhere
		case <-time.After(claimPoll):
		}
	}
	jr, err := hd.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `cat "$1"`, "corral-acp-journal", req.Journal}})
	if err != nil {
		return err
	}
	if jr.ExitCode != 0 {
		return sandbox.Errorf(sandbox.Internal, "harness.acp.reattach", req.RunID, "reading the journal exited %d", jr.ExitCode)
	}
	st := readState(jr.Stdout)
	if st.ended {
		return nil
	}
	if st.promptID == "" || st.sessionID == "" {
		// Nothing to go on with: the run ends as the session lost.
		_, err := claim(ctx, hd, req.RunDir, "orphan.gone")
		return err
	}
	if code, err := claim(ctx, hd, req.RunDir, "attach"); err != nil || code != 0 {
		return err
	}
	if req.WorkspaceRoot == "" {
		req.WorkspaceRoot = hd.WorkspaceRoot()
	}
	h.mu.Lock()
	if h.base.Err() != nil || h.sessions[req.RunID] != nil {
		h.mu.Unlock()
		// The relay waits for the claimed client: let it go.
		return sandbox.Errorf(sandbox.FailedPrecondition, "harness.acp.reattach", req.RunID, "the harness closed while taking the session over")
	}
	sctx, scancel := context.WithCancel(h.base)
	h.mu.Unlock()
	s := &session{h: h, hd: hd, req: req, ctx: sctx, cancel: scancel, decisions: st.decisions, approvalWait: st.wait,
		startTimeout: h.opts.StartTimeout, log: h.opts.Logger.With("run", req.RunID),
		promptID: st.promptID, promptResp: make(chan []byte, 1), warm: st.warm}
	if err := s.spawn(st.off); err != nil {
		scancel()
		return err
	}
	h.start(s, func() { s.resume(st) })
	return nil
}

// pendingPermission is a permission request of the agent that the
// journal shows in flight.
type pendingPermission struct {
	id     json.RawMessage
	params acpsdk.RequestPermissionRequest
	off    int64   // the offset past its line in the agent's output log
	perm   *record // the client's permission record; nil: it died first
	answer *record // how a waiting request was settled, if it was
}

// resumeState is what a run's journal says about its turn in flight.
type resumeState struct {
	ended     bool // the turn or the session ended: nothing to take over
	sessionID string
	promptID  string
	wait      time.Duration
	decisions map[string]bool
	off       int64 // the offset past the last line of the agent's output journaled
	pending   []*pendingPermission
	warm      *warmState // a warm turn: the kept agent it runs on
}

// readState rebuilds a turn's state from its journal. A permission record
// belongs to the oldest request that has none yet (agents ask one at a
// time, and the client journals the request before its handler runs).
func readState(journal []byte) *resumeState {
	st := &resumeState{decisions: map[string]bool{}}
	var asks []*pendingPermission
	next := 0 // the first ask without a permission record
	for _, line := range bytes.Split(journal, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var r record
		if json.Unmarshal(line, &r) != nil || r.Kind == "" {
			continue
		}
		st.off = max(st.off, r.Off)
		switch r.Kind {
		case recClient:
			if d, err := time.ParseDuration(r.Waiting); err == nil {
				st.wait = d
			}
			for k, v := range r.Approvals {
				st.decisions[k] = v
			}
			if r.WarmDir != "" && r.WarmPid != "" {
				st.warm = &warmState{dir: r.WarmDir, pid: r.WarmPid, found: true}
			}
		case recSession:
			st.sessionID = r.SessionID
		case recRPC:
			switch r.Method {
			case acpsdk.AgentMethodSessionPrompt:
				st.promptID = string(bytes.TrimSpace(r.RPCID))
			case acpsdk.ClientMethodSessionRequestPermission:
				p := &pendingPermission{id: r.RPCID, off: r.Off}
				if json.Unmarshal(r.Params, &p.params) == nil {
					asks = append(asks, p)
				}
			}
		case recPermission:
			if next < len(asks) {
				rr := r
				asks[next].perm = &rr
				next++
			}
		case recAnswer:
			if r.By != answeredCancelled {
				st.decisions[r.ApprovalID] = r.Decision == "allow"
			}
			for _, p := range asks {
				if p.perm != nil && p.answer == nil && p.perm.ApprovalID == r.ApprovalID && p.perm.Waiting != "" {
					rr := r
					p.answer = &rr
					break
				}
			}
		case recPrompt, recError, recEnd:
			st.ended = true
		}
	}
	// A request is in flight when its handler never finished: it waits
	// unanswered, or nothing the agent wrote after it shows that the
	// agent got its answer.
	for _, p := range asks {
		waiting := p.perm != nil && p.perm.Waiting != "" && p.answer == nil
		if p.perm == nil || waiting || p.off >= st.off {
			st.pending = append(st.pending, p)
		}
	}
	return st
}

// resume drives a session taken over to the end of its turn and tears it
// down, as run does for a session this process started.
func (s *session) resume(st *resumeState) {
	defer close(s.done)
	failed := s.goOn(st)
	close(s.turnDone)
	s.teardown(failed)
}

func (s *session) goOn(st *resumeState) *record {
	_ = s.jw.write(record{Kind: recReattach, Off: st.off})
	s.sid.Store(acpsdk.SessionId(st.sessionID))
	for _, p := range st.pending {
		go s.answerPending(p)
	}
	select {
	case line := <-s.promptResp:
		var m struct {
			Result *acpsdk.PromptResponse `json:"result"`
			Error  *acpsdk.RequestError   `json:"error"`
		}
		if err := json.Unmarshal(line, &m); err != nil || m.Result == nil {
			if m.Error != nil {
				return s.failure("session/prompt", m.Error)
			}
			return &record{Kind: recError, Code: "acp-session-prompt", Message: fmt.Sprintf("session/prompt failed: the agent's answer is not one: %.200s", strings.TrimSpace(string(line)))}
		}
		var usage json.RawMessage
		if m.Result.Usage != nil {
			usage, _ = json.Marshal(m.Result.Usage)
		}
		_ = s.jw.write(record{Kind: recPrompt, StopReason: string(m.Result.StopReason), Usage: usage})
		s.stopped = m.Result.StopReason
		return nil
	case <-s.conn.Done():
		if s.off.Load() == st.off {
			// The agent died before this client read a word from it:
			// while no client held the session, as the relay would say.
			return &record{Kind: recError, Code: CodeSessionLost, Message: "the ACP agent exited while no corral process held its session; the session is lost"}
		}
		return s.failure("session/prompt", fmt.Errorf("the agent's output ended"))
	case <-s.ctx.Done():
		return s.failure("session/prompt", s.ctx.Err())
	}
}

// answerPending answers a permission request the previous client left in
// flight: one it never handled as any request is; one that waits, by the
// answers file until what is left of its deadline; one already decided,
// again with that decision (an agent ignores an answer it got already).
func (s *session) answerPending(p *pendingPermission) {
	var resp acpsdk.RequestPermissionResponse
	switch {
	case p.perm == nil:
		var err error
		if resp, err = s.RequestPermission(s.ctx, p.params); err != nil {
			s.log.Debug("acp: answering a permission request taken over failed", "err", err)
			return
		}
	case p.answer != nil:
		resp = permissionResponse(p.params.Options, p.answer.Decision == "allow", p.answer.By == answeredCancelled)
	case p.perm.Waiting != "":
		left := s.approvalWait
		if until, err := time.Parse(time.RFC3339Nano, p.perm.Until); err == nil {
			left = time.Until(until)
		}
		resp = s.settle(s.ctx, p.params.Options, p.perm.ApprovalID, left)
	default:
		resp = permissionResponse(p.params.Options, p.perm.Decision == "allow", false)
	}
	b, err := json.Marshal(struct {
		JSONRPC string                           `json:"jsonrpc"`
		ID      json.RawMessage                  `json:"id"`
		Result  acpsdk.RequestPermissionResponse `json:"result"`
	}{"2.0", p.id, resp})
	if err != nil {
		return
	}
	if _, err := s.input.Write(append(b, '\n')); err != nil {
		s.log.Debug("acp: answering a permission request taken over failed", "err", err)
	}
}
