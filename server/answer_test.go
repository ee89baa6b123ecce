package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// waiter is a test harness whose agent waits, with its turn, for an
// answer in the run's harness.AnswersFile and prints it: the shape of a
// live approval (the acp harness's approvalWait) without an ACP agent.
type waiter struct{}

func (waiter) Name() string      { return "waiter" }
func (waiter) AnswersLive() bool { return true }

func (waiter) Prepare(ctx context.Context, hd sandbox.Handle, req harness.Request) (harness.Invocation, error) {
	if err := harness.WriteFile(ctx, hd, path.Join(req.RunDir, "ready"), nil, "600"); err != nil {
		return harness.Invocation{}, err
	}
	script := `f="$1/` + harness.AnswersFile + `"; echo waiting; while ! [ -s "$f" ]; do sleep 0.05; done; cat "$f"`
	return harness.Invocation{Command: sandbox.Command{Args: []string{"sh", "-c", script, "waiter", req.RunDir}}}, nil
}

func (waiter) Translator(run harness.Run) harness.Translator {
	return command.Harness{}.Translator(run)
}

var errStop = errors.New("stop following")

// TestAnswerApprovalLive: POST /v1/runs/{id}/approvals reaches the agent
// of a live run that waits for it; it is refused for another tenant's run
// (404), with a bad body (400), for a harness that cannot wait (412) and
// once the run has ended (412).
func TestAnswerApprovalLive(t *testing.T) {
	e := newEnv(t, envOptions{Extra: []harness.Harness{waiter{}}, Tokens: map[string]string{"tok-a": "a", "tok-b": "b"}})
	resp, body := do(t, e.URL, request{Method: "POST", Path: "/v1/runs", Token: "tok-a", Body: `{"harness":"waiter","prompt":"wait"}`})
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		t.Fatalf("start: %d %s", resp.StatusCode, body)
	}
	var rec api.Run
	if err := json.Unmarshal(body, &rec); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, time.Minute)
	// Wait until the agent prints "waiting" (its run directory exists).
	waiting := false
	_ = e.Runner.Follow(ctx, rec.ID, 0, func(ev store.Event) error {
		if strings.Contains(string(ev.Data), "waiting") {
			waiting = true
			return errStop
		}
		return nil
	})
	if !waiting {
		t.Fatal("the agent never started waiting")
	}
	answers := "/v1/runs/" + rec.ID + "/approvals"
	refused := 0
	for _, c := range []struct {
		token, body string
		status      int
	}{
		{"tok-b", `{"approvalId":"x:command:deploy","allow":true}`, http.StatusNotFound},
		{"tok-a", `{"approvalId":"","allow":true}`, http.StatusBadRequest},
		{"tok-a", `{"approvalId":"x:command:deploy","allow":true,"extra":1}`, http.StatusBadRequest},
	} {
		resp, body := do(t, e.URL, request{Method: "POST", Path: answers, Token: c.token, Body: c.body})
		if resp.StatusCode != c.status {
			t.Errorf("POST %s %s as %s: %d %s, want %d", answers, c.body, c.token, resp.StatusCode, body, c.status)
		} else {
			refused++
		}
	}
	if err := e.client("tok-a").Answer(ctx, rec.ID, "x:command:deploy", true); err != nil {
		t.Fatalf("answer: %v", err)
	}
	final := e.waitStatus(rec.ID, store.RunCompleted, time.Minute)
	evs, err := e.Store.ReadEvents(ctx, rec.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, ev := range evs {
		all.Write(ev.Data)
	}
	if !strings.Contains(all.String(), `x:command:deploy`) || !strings.Contains(all.String(), `\"allow\":true`) {
		t.Errorf("the agent did not get the answer: %s", all.String())
	}
	resp, body = do(t, e.URL, request{Method: "POST", Path: answers, Token: "tok-a", Body: `{"approvalId":"x:command:deploy","allow":false}`})
	if resp.StatusCode != http.StatusPreconditionFailed {
		t.Errorf("answering an ended run: %d %s, want 412", resp.StatusCode, body)
	} else {
		refused++
	}
	// The command harness cannot wait for an answer.
	resp, body = do(t, e.URL, request{Method: "POST", Path: "/v1/runs", Token: "tok-a", Body: `{"args":["sleep","30"]}`})
	if err := json.Unmarshal(body, &rec); err != nil {
		t.Fatal(err)
	}
	resp, body = do(t, e.URL, request{Method: "POST", Path: "/v1/runs/" + rec.ID + "/approvals", Token: "tok-a", Body: `{"approvalId":"x","allow":true}`})
	if resp.StatusCode != http.StatusPreconditionFailed {
		t.Errorf("answering a command run: %d %s, want 412", resp.StatusCode, body)
	} else {
		refused++
	}
	t.Logf("live answer reached the waiting agent (run %s); refused %d of 5 bad answers", final.Status, refused)
}
