package claudecode

import (
	"context"
	"encoding/hex"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// Options of live answers.
const (
	// OptApprovalWait (a Go duration; "0", the default, turns it off) is
	// how long an action the policy asks about waits, with the turn, in
	// corral's permission tool for a live answer (Runner.Answer, appended
	// to harness.AnswersFile) before the policy's default decides it.
	OptApprovalWait = "approvalWait"
	// OptAnswerPoll (a Go duration, default 250ms) is how often the
	// waiting tool reads the answers file.
	OptAnswerPoll = "answerPoll"
)

// EventWarning carries something the user should know (value:
// {"message"}), such as answers the permission tool refused.
const EventWarning = "claudecode.warning"

// defaultAnswerPoll is how often a waiting permission tool reads the
// answers file unless OptAnswerPoll says otherwise.
const defaultAnswerPoll = 250 * time.Millisecond

// toolTimeoutMargin is added to the approval wait for the permission
// server's MCP tool-call timeout, so Claude Code does not give up on the
// tool before its deadline decides.
const toolTimeoutMargin = time.Minute

// AnswersLive reports true: with option approvalWait, an ask waits in the
// permission tool for answers in the run's harness.AnswersFile.
func (Harness) AnswersLive() bool { return true }

var _ harness.LiveApprover = Harness{}

// liveOptions reads approvalWait and answerPoll.
func liveOptions(req harness.Request) (wait, poll time.Duration, err error) {
	const op = "claudecode.prepare"
	poll = defaultAnswerPoll
	if s := strings.TrimSpace(req.Options[OptApprovalWait]); s != "" {
		if wait, err = time.ParseDuration(s); err != nil || wait < 0 {
			return 0, 0, sandbox.Errorf(sandbox.InvalidArgument, op, OptApprovalWait, "%q is not a duration of zero or more", s)
		}
	}
	if s := strings.TrimSpace(req.Options[OptAnswerPoll]); s != "" {
		if poll, err = time.ParseDuration(s); err != nil || poll <= 0 {
			return 0, 0, sandbox.Errorf(sandbox.InvalidArgument, op, OptAnswerPoll, "%q is not a positive duration", s)
		}
	}
	return wait, poll, nil
}

// prepareLive writes the answer key for the permission tool (which reads
// and unlinks it when it starts) and returns how its asks wait. Without a
// wait, an answer key or the run's journal, asks do not wait.
func prepareLive(ctx context.Context, h sandbox.Handle, req harness.Request, wait, poll time.Duration) (liveWait, error) {
	if wait <= 0 || len(req.AnswerKey) == 0 || req.Journal == "" {
		return liveWait{}, nil
	}
	key := path.Join(req.RunDir, "answer.key")
	if err := harness.WriteFile(ctx, h, key, []byte(hex.EncodeToString(req.AnswerKey)), "600"); err != nil {
		return liveWait{}, sandbox.Wrap(sandbox.Internal, "claudecode.prepare", key, err)
	}
	return liveWait{wait: wait, poll: poll, answers: path.Join(req.RunDir, harness.AnswersFile), key: key, journal: req.Journal}, nil
}

// CheckMode accepts Claude Code's permission modes (the run's mode is
// --permission-mode, as option permissionMode; bypassPermissions is
// still refused at Prepare while the policy guards anything).
func (Harness) CheckMode(mode string) error {
	if !validModes[mode] {
		return sandbox.Errorf(sandbox.InvalidArgument, "claudecode.mode", mode, "the %s harness has no mode %q (its modes are Claude Code's permission modes: %s)", Name, mode, strings.Join(modeNames(), ", "))
	}
	return nil
}

var _ harness.Moder = Harness{}

func modeNames() []string {
	out := make([]string, 0, len(validModes))
	for m := range validModes {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// permissionMode is the run's mode (Request.Mode) or option
// permissionMode; both set, they must agree.
func permissionMode(req harness.Request) (string, error) {
	opt := strings.TrimSpace(req.Options["permissionMode"])
	switch {
	case req.Mode == "":
		return opt, nil
	case opt != "" && opt != req.Mode:
		return "", sandbox.Errorf(sandbox.InvalidArgument, "claudecode.prepare", req.RunID, "mode %q and option permissionMode %q disagree", req.Mode, opt)
	}
	return req.Mode, nil
}
