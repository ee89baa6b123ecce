package harness

import (
	"context"
	"encoding/json"
	"path"
	"strings"

	"github.com/d10ffeed/corral/sandbox"
)

// AnswersFile is the file in a run's private directory (Request.RunDir)
// that carries answers to the run's approval requests while its turn is
// live: one JSON Answer per line, appended by whichever corral process
// answers (AppendAnswer) and read by the harness that waits (ReadAnswers).
// It lives in the sandbox, so any replica that reaches the sandbox can
// answer a request whatever process drives the run.
const AnswersFile = "answers.ndjson"

// Answer is one answer to an approval request.
type Answer struct {
	ID    string `json:"approvalId"`
	Allow bool   `json:"allow"`
}

// LiveApprover is implemented by harnesses that can hold an approval
// request open while the turn waits for a person (the acp harness, with
// its approvalWait option): answers appended to AnswersFile reach the
// waiting turn. The runner answers live only for these.
type LiveApprover interface {
	// AnswersLive reports whether the harness reads AnswersFile while a
	// request waits.
	AnswersLive() bool
}

// answerScript appends $2 (one line) to $1/answers.ndjson; $1 must exist.
const answerScript = `umask 077 && [ -d "$1" ] && printf '%s\n' "$2" >>"$1/` + AnswersFile + `"`

// AppendAnswer appends an answer to the answers file of the run whose
// private directory is runDir. A run whose directory is gone (it ended)
// is FailedPrecondition.
func AppendAnswer(ctx context.Context, h sandbox.Handle, runDir string, a Answer) error {
	const op = "harness.answer"
	if a.ID == "" || strings.ContainsAny(a.ID, "\n") {
		return sandbox.Errorf(sandbox.InvalidArgument, op, a.ID, "an approval id is one non-empty line")
	}
	b, err := json.Marshal(a)
	if err != nil {
		return sandbox.Wrap(sandbox.Internal, op, a.ID, err)
	}
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", answerScript, "corral-answer", runDir, string(b)}})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return sandbox.Errorf(sandbox.FailedPrecondition, op, a.ID, "the run's private directory is gone (the run ended): %s", strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// ReadAnswers returns the answers in runDir's answers file, the last for
// each id winning; none when there is no file.
func ReadAnswers(ctx context.Context, h sandbox.Handle, runDir string) (map[string]bool, error) {
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `cat "$1" 2>/dev/null || true`, "corral-answers", path.Join(runDir, AnswersFile)}})
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		var a Answer
		if json.Unmarshal([]byte(line), &a) == nil && a.ID != "" {
			out[a.ID] = a.Allow
		}
	}
	return out, nil
}
