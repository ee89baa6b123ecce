package harness

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path"
	"strconv"
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
	// MAC authenticates the answer with the run's Request.AnswerKey
	// (AnswerMAC); AppendAnswer sets it.
	MAC string `json:"mac,omitempty"`
}

// AnswerMAC is the hex HMAC-SHA256, under key, of an answer.
func AnswerMAC(key []byte, id string, allow bool) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("corral-answer\x00" + id + "\x00" + strconv.FormatBool(allow)))
	return hex.EncodeToString(m.Sum(nil))
}

// LiveApprover is implemented by harnesses that can hold an approval
// request open while the turn waits for a person (acp, claude-code and
// opencode's server mode, with their approvalWait option): answers appended to AnswersFile reach the
// waiting turn. The runner answers live only for these.
type LiveApprover interface {
	// AnswersLive reports whether the harness reads AnswersFile while a
	// request waits.
	AnswersLive() bool
}

// answerScript appends $2 (one line) to $1/answers.ndjson; $1 must exist.
const answerScript = `umask 077 && [ -d "$1" ] && printf '%s\n' "$2" >>"$1/` + AnswersFile + `"`

// AppendAnswer appends an answer, authenticated with key (the run's
// Request.AnswerKey), to the answers file of the run whose private
// directory is runDir. A run whose directory is gone (it ended) is
// FailedPrecondition.
func AppendAnswer(ctx context.Context, h sandbox.Handle, runDir string, key []byte, a Answer) error {
	const op = "harness.answer"
	if a.ID == "" || strings.ContainsAny(a.ID, "\n") {
		return sandbox.Errorf(sandbox.InvalidArgument, op, a.ID, "an approval id is one non-empty line")
	}
	if len(key) == 0 {
		return sandbox.Errorf(sandbox.FailedPrecondition, op, a.ID, "no answer key for the run")
	}
	a.MAC = AnswerMAC(key, a.ID, a.Allow)
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

// ReadAnswers returns the answers in runDir's answers file that key
// authenticates, the last for each id winning, and how many lines it
// refused (unreadable, or not authenticated: written by something in the
// sandbox, such as the agent). None without a file or a key.
func ReadAnswers(ctx context.Context, h sandbox.Handle, runDir string, key []byte) (map[string]bool, int, error) {
	if len(key) == 0 {
		return map[string]bool{}, 0, nil
	}
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `cat "$1" 2>/dev/null || true`, "corral-answers", path.Join(runDir, AnswersFile)}})
	if err != nil {
		return nil, 0, err
	}
	out, refused := map[string]bool{}, 0
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var a Answer
		if json.Unmarshal([]byte(line), &a) != nil || a.ID == "" ||
			!hmac.Equal([]byte(a.MAC), []byte(AnswerMAC(key, a.ID, a.Allow))) {
			refused++
			continue
		}
		out[a.ID] = a.Allow
	}
	return out, refused, nil
}
