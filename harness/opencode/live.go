package opencode

import (
	"context"
	"encoding/hex"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// Options of live answers (server mode only).
const (
	// OptApprovalWait (a Go duration; "0", the default, turns it off) is
	// how long a permission the policy asks about waits, with the turn, in
	// the server-mode client for a live answer (Runner.Answer, appended to
	// harness.AnswersFile) before the policy's default decides it.
	OptApprovalWait = "approvalWait"
	// OptAnswerPoll (a Go duration, default 250ms) is how often the
	// waiting client reads the answers file.
	OptAnswerPoll = "answerPoll"
)

const defaultAnswerPoll = 250 * time.Millisecond

// AnswersLive reports true: in server mode with option approvalWait, a
// permission the policy asks about waits in the client for answers in the
// run's harness.AnswersFile.
func (Harness) AnswersLive() bool { return true }

var _ harness.LiveApprover = Harness{}

// clientLive is how the server-mode client waits for live answers.
type clientLive struct {
	Wait     int64  `json:"wait"` // milliseconds
	WaitText string `json:"waitText"`
	Poll     int64  `json:"poll"` // milliseconds
	Answers  string `json:"answers"`
	KeyFile  string `json:"keyFile"` // the answer key, hex; the client unlinks it once read
}

// liveOptions reads approvalWait and answerPoll; they need server mode.
func liveOptions(req harness.Request, mode string) (wait, poll time.Duration, err error) {
	const op = "harness.opencode"
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
	if wait > 0 && mode != ModeServer {
		return 0, 0, sandbox.Errorf(sandbox.InvalidArgument, op, OptApprovalWait, "live answers need option mode=server (opencode run cannot hold a permission open)")
	}
	return wait, poll, nil
}

// prepareLive writes the answer key for the client and returns its live
// configuration; nil without a wait or an answer key.
func prepareLive(ctx context.Context, h sandbox.Handle, req harness.Request, wait, poll time.Duration) (*clientLive, error) {
	if wait <= 0 || len(req.AnswerKey) == 0 {
		return nil, nil
	}
	key := path.Join(req.RunDir, "answer.key")
	if err := harness.WriteFile(ctx, h, key, []byte(hex.EncodeToString(req.AnswerKey)), "600"); err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, "harness.opencode", key, err)
	}
	return &clientLive{Wait: wait.Milliseconds(), WaitText: wait.String(), Poll: poll.Milliseconds(),
		Answers: path.Join(req.RunDir, harness.AnswersFile), KeyFile: key}, nil
}

var agentRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// CheckMode accepts an OpenCode agent name (the run's mode): "build",
// "plan" or an agent the project defines.
func (Harness) CheckMode(mode string) error {
	if !agentRE.MatchString(mode) {
		return sandbox.Errorf(sandbox.InvalidArgument, "harness.opencode", mode, "the %s harness's mode is an OpenCode agent name (build, plan, or one the project defines), not %q", Name, mode)
	}
	return nil
}

var _ harness.Moder = Harness{}
