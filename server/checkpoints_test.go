package server_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/store"
)

// TestCheckpointRoutes: save a thread's workspace through the API, list
// it, read its entries, fork it into a new thread whose first run finds
// the file, restore the first thread over a change; bad bodies are 400,
// unknown threads and checkpoints 404, a second fork into the same thread
// 412.
func TestCheckpointRoutes(t *testing.T) {
	e := newEnv(t, envOptions{})
	id := e.startJSON("", jsonBody(t, api.StartRun{Thread: "t-ck", Prompt: "echo hello > note.txt"}))
	e.waitStatus(id, store.RunCompleted, time.Minute)

	resp, body := do(t, e.URL, request{Method: "POST", Path: "/v1/threads/t-ck/checkpoints", Body: `{"label":"first"}`})
	var saved struct {
		Checkpoint store.Checkpoint `json:"checkpoint"`
	}
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &saved) != nil || saved.Checkpoint.Label != "first" {
		t.Fatalf("POST checkpoints: %s %s", resp.Status, body)
	}
	resp, body = do(t, e.URL, request{Method: "GET", Path: "/v1/threads/t-ck/checkpoints"})
	var items []struct {
		ID   string `json:"id"`
		Head bool   `json:"head"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &items) != nil || len(items) != 1 || items[0].ID != saved.Checkpoint.ID || !items[0].Head {
		t.Fatalf("GET checkpoints: %s %s", resp.Status, body)
	}
	resp, body = do(t, e.URL, request{Method: "GET", Path: "/v1/threads/t-ck/checkpoints/" + saved.Checkpoint.ID})
	var full store.Checkpoint
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &full) != nil || len(full.Entries) != 1 || full.Entries[0].Path != "note.txt" {
		t.Fatalf("GET checkpoint: %s %s", resp.Status, body)
	}
	resp, body = do(t, e.URL, request{Method: "POST", Path: "/v1/threads/t-ck/fork", Body: `{"thread":"t-fork"}`})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST fork: %s %s", resp.Status, body)
	}
	fid := e.startJSON("", jsonBody(t, api.StartRun{Thread: "t-fork", Prompt: "cat note.txt"}))
	e.waitStatus(fid, store.RunCompleted, time.Minute)
	e.waitLine(fid, "hello", time.Minute)

	cid := e.startJSON("", jsonBody(t, api.StartRun{Thread: "t-ck", Prompt: "echo changed > note.txt"}))
	e.waitStatus(cid, store.RunCompleted, time.Minute)
	resp, body = do(t, e.URL, request{Method: "POST", Path: "/v1/threads/t-ck/restore", Body: `{}`})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST restore: %s %s", resp.Status, body)
	}
	rid := e.startJSON("", jsonBody(t, api.StartRun{Thread: "t-ck", Prompt: "cat note.txt"}))
	e.waitStatus(rid, store.RunCompleted, time.Minute)
	e.waitLine(rid, "hello", time.Minute)

	// The Go client speaks the same routes.
	c := e.client("")
	cp, err := c.SaveCheckpoint(t.Context(), "t-ck", "second")
	if err != nil || cp.Label != "second" || cp.Parent != saved.Checkpoint.ID {
		t.Fatalf("client SaveCheckpoint: %+v, %v", cp, err)
	}
	cps, head, err := c.Checkpoints(t.Context(), "t-ck")
	if err != nil || len(cps) != 2 || head != cp.ID {
		t.Fatalf("client Checkpoints: %d, head %q, %v", len(cps), head, err)
	}
	fork, err := c.Fork(t.Context(), "t-ck", saved.Checkpoint.ID, "t-fork2")
	if err != nil || fork.ThreadID != "t-fork2" || fork.SourceCheckpointID != saved.Checkpoint.ID {
		t.Fatalf("client Fork: %+v, %v", fork, err)
	}
	if res, err := c.RestoreCheckpoint(t.Context(), "t-ck", saved.Checkpoint.ID); err != nil || res["files"] != 1 {
		t.Fatalf("client RestoreCheckpoint: %v, %v", res, err)
	}

	for _, tc := range []struct {
		method, path, body string
		want               int
	}{
		{"POST", "/v1/threads/t-ck/checkpoints", `{"label":1}`, http.StatusBadRequest},
		{"POST", "/v1/threads/t-ck/fork", `{"nope":true}`, http.StatusBadRequest},
		{"POST", "/v1/threads/t-none/checkpoints", `{}`, http.StatusNotFound},
		{"GET", "/v1/threads/t-ck/checkpoints/ckpt-nope", "", http.StatusNotFound},
		{"POST", "/v1/threads/t-ck/fork", `{"thread":"t-fork"}`, http.StatusPreconditionFailed},
	} {
		resp, body := do(t, e.URL, request{Method: tc.method, Path: tc.path, Body: tc.body})
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s %s: %s %s, want %d", tc.method, tc.path, tc.body, resp.Status, body, tc.want)
		}
	}
}
