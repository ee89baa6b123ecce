package acp

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// resolve asks the policy about an action, with the approvals given (in
// Request.Approvals, and live during this turn).
func (s *session) resolve(kind sandbox.ApprovalKind, target string) sandbox.Resolution {
	s.decMu.Lock()
	defer s.decMu.Unlock()
	return sandbox.EffectivePolicy(s.req.Policy).Resolve(sandbox.ApprovalRequest{Provider: Name, Kind: kind, Target: target}, s.req.Scripts, s.decisions)
}

// decide records a live answer for the rest of the turn: the terminal or
// file write the agent makes for the call it was allowed is not asked
// about again.
func (s *session) decide(id string, allow bool) {
	s.decMu.Lock()
	defer s.decMu.Unlock()
	d := make(map[string]bool, len(s.decisions)+1)
	for k, v := range s.decisions {
		d[k] = v
	}
	d[id] = allow
	s.decisions = d
}

func decision(res sandbox.Resolution) string {
	if res.Decision == sandbox.Allow {
		return "allow"
	}
	return "deny"
}

func denied(res sandbox.Resolution, what string) error {
	msg := what + " denied by the sandbox policy"
	if res.NeedsApproval {
		msg = what + " needs approval (approval id " + res.ID + "); approve it and run again"
	}
	return sandbox.Errorf(sandbox.PermissionDenied, "harness.acp", res.ID, "%s", msg)
}

// RequestPermission answers from the policy: allow and deny are final;
// ask rejects the call for this turn and journals an approval request,
// unless approvalWait is set: then the request waits, with the turn, for
// a live answer (awaitAnswer) or its deadline.
func (s *session) RequestPermission(ctx context.Context, p acpsdk.RequestPermissionRequest) (acpsdk.RequestPermissionResponse, error) {
	g := gateFor(p.ToolCall, s.req.WorkspaceRoot)
	tc, _ := json.Marshal(p.ToolCall)
	rec := record{Kind: recPermission, ToolCall: tc, Gate: "none", Decision: "allow"}
	if p.ToolCall.Title != nil {
		rec.Title = *p.ToolCall.Title
	}
	allow := true
	var res sandbox.Resolution
	if g.kind != "" {
		res = s.resolve(g.kind, g.target)
		allow = res.Decision == sandbox.Allow
		rec.Gate, rec.Target, rec.Decision, rec.ApprovalID, rec.NeedsApproval = string(g.kind), g.target, decision(res), res.ID, res.NeedsApproval
	}
	wait := res.NeedsApproval && s.approvalWait > 0
	if wait {
		rec.Decision, rec.Waiting = "", s.approvalWait.String()
		rec.Until = time.Now().Add(s.approvalWait).UTC().Format(time.RFC3339Nano)
	}
	_ = s.jw.write(rec)
	if wait {
		return s.settle(ctx, p.Options, res.ID, s.approvalWait), nil
	}
	return permissionResponse(p.Options, allow, false), nil
}

// settle waits up to wait for a live answer to approval id (awaitAnswer),
// journals how it was settled, and returns the answer for the agent.
func (s *session) settle(ctx context.Context, options []acpsdk.PermissionOption, id string, wait time.Duration) acpsdk.RequestPermissionResponse {
	allow, by := s.awaitAnswer(ctx, id, wait)
	if by == answeredCancelled {
		_ = s.jw.write(record{Kind: recAnswer, ApprovalID: id, Decision: "deny", By: by})
		return permissionResponse(options, false, true)
	}
	s.decide(id, allow)
	d := "deny"
	if allow {
		d = "allow"
	}
	_ = s.jw.write(record{Kind: recAnswer, ApprovalID: id, Decision: d, By: by})
	return permissionResponse(options, allow, false)
}

// permissionResponse picks the agent's option for an answer; cancelled
// (or no fitting option) answers the request cancelled.
func permissionResponse(options []acpsdk.PermissionOption, allow, cancelled bool) acpsdk.RequestPermissionResponse {
	opt, ok := chooseOption(options, allow)
	if cancelled || !ok {
		return acpsdk.RequestPermissionResponse{Outcome: acpsdk.RequestPermissionOutcome{Cancelled: &acpsdk.RequestPermissionOutcomeCancelled{}}}
	}
	return acpsdk.RequestPermissionResponse{Outcome: acpsdk.RequestPermissionOutcome{Selected: &acpsdk.RequestPermissionOutcomeSelected{OptionId: opt}}}
}

// How a waiting approval request was settled (record.By).
const (
	answeredLive      = "answer"    // an answer in the run's answers file
	answeredDeadline  = "deadline"  // approvalWait passed: the policy's default
	answeredCancelled = "cancelled" // the turn was cancelled or the session ended
)

// awaitAnswer waits for an answer to approval id in the run's answers
// file, polled every Options.AnswerPoll, until wait passes (then
// the policy's default decides: allow or deny as it says, deny when it
// asks) or the turn is cancelled.
func (s *session) awaitAnswer(ctx context.Context, id string, wait time.Duration) (allow bool, by string) {
	deadline := time.NewTimer(max(wait, 0))
	defer deadline.Stop()
	poll := time.NewTicker(s.h.opts.AnswerPoll)
	defer poll.Stop()
	for {
		if answers, refused, err := harness.ReadAnswers(ctx, s.hd, s.req.RunDir, s.req.AnswerKey); err == nil {
			if refused > s.refusedAnswers {
				s.refusedAnswers = refused
				_ = s.jw.write(record{Kind: recWarning, Message: strconv.Itoa(refused) + " line(s) of the run's answers file are not authenticated answers (written inside the sandbox?): ignored"})
			}
			if a, ok := answers[id]; ok {
				return a, answeredLive
			}
		} else {
			s.log.Debug("acp: reading the answers file failed", "err", err)
		}
		select {
		case <-poll.C:
		case <-deadline.C:
			return sandbox.EffectivePolicy(s.req.Policy).Capability("") == sandbox.Allow, answeredDeadline
		case <-s.cancelling:
			return false, answeredCancelled
		case <-ctx.Done():
			return false, answeredCancelled
		case <-s.ctx.Done():
			return false, answeredCancelled
		}
	}
}
