package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/sandbox"
)

// TestRunStderr: GET /v1/runs/{id}/stderr shows a running run's stderr
// (its secret values redacted, as in its events) to its tenant only.
func TestRunStderr(t *testing.T) {
	const canary = "sk-canary-6f1d2c"
	secrets, err := sandbox.NewSecrets(map[string]string{"API_KEY": canary})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{Tokens: map[string]string{"a-token": "acme", "b-token": "beta"},
		Workspace: &sandbox.Workspace{Secrets: secrets}})
	id := e.startJSON("a-token", jsonBody(t, api.StartRun{Prompt: `echo "warming up with $API_KEY" >&2; echo started; sleep 60`}))
	t.Cleanup(func() { do(t, e.URL, request{Method: "POST", Path: "/v1/runs/" + id + "/cancel", Token: "a-token"}) })

	var got api.Stderr
	deadline := time.Now().Add(time.Minute) // a hang guard: the line comes at once
	for !strings.Contains(got.Stderr, "warming up") {
		if time.Now().After(deadline) {
			t.Fatalf("no stderr after a minute: %q", got.Stderr)
		}
		resp, body := do(t, e.URL, request{Method: "GET", Path: "/v1/runs/" + id + "/stderr", Token: "a-token"})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stderr: %d %s", resp.StatusCode, body)
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Contains(got.Stderr, canary) {
		t.Fatalf("the secret reached the stderr endpoint: %q", got.Stderr)
	}
	t.Logf("running run's stderr: %q", got.Stderr)

	for _, tc := range []struct {
		name string
		r    request
		want int
	}{
		{"another tenant", request{Method: "GET", Path: "/v1/runs/" + id + "/stderr", Token: "b-token"}, http.StatusNotFound},
		{"no such run", request{Method: "GET", Path: "/v1/runs/run-nope/stderr", Token: "a-token"}, http.StatusNotFound},
		{"bad max", request{Method: "GET", Path: "/v1/runs/" + id + "/stderr?max=0", Token: "a-token"}, http.StatusBadRequest},
		{"max too big", request{Method: "GET", Path: "/v1/runs/" + id + "/stderr?max=99999999", Token: "a-token"}, http.StatusBadRequest},
	} {
		resp, body := do(t, e.URL, tc.r)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, resp.StatusCode, body, tc.want)
		}
	}
}
