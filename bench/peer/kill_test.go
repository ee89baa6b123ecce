//go:build peerbench

package peer

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/store"
)

// lineVerdict says which lines of the slow answer text holds, and how often.
func lineVerdict(text string) string {
	missing, repeated := 0, 0
	for i := 1; i <= 40; i++ {
		switch n := strings.Count(text, fmt.Sprintf("Line %02d of", i)); {
		case n == 0:
			missing++
		case n > 1:
			repeated++
		}
	}
	switch {
	case missing == 0 && repeated == 0:
		return "all 40 lines of the answer, each once"
	default:
		return fmt.Sprintf("%d of 40 lines missing, %d repeated", missing, repeated)
	}
}

// corralKill starts a Claude Code run on a daemon of its own, SIGKILLs
// "corral serve" once the answer's second line has arrived, starts it
// again on the same store, and reads the run's events from the start.
func corralKill(t *testing.T, e *env, slow *fakemodel.Server) string {
	dir := mkdir(t, e.dir, "corral-kill")
	port := freePort(t)
	d, c := e.startCorral(t, dir, port)
	ctx, cancel := withTimeout()
	defer cancel()
	r, err := c.Start(ctx, api.StartRun{Thread: "kill", Harness: "claude-code", Model: "claude-sonnet-4-5", Auth: "api-key",
		Options: map[string]string{"executable": e.claude, "baseURL": slow.URL, "isSandbox": "true"}, Prompt: "Explain at length."})
	if err != nil {
		return "n/a (start: " + oneLine(err.Error()) + ")"
	}
	sctx, scancel := context.WithCancel(ctx)
	var text strings.Builder
	mid := make(chan struct{})
	var once sync.Once
	go func() {
		_ = c.Events(sctx, r.ID, 0, func(ev store.Event) error {
			if ev.Type == "TEXT_MESSAGE_CONTENT" {
				var m struct {
					Delta string `json:"delta"`
				}
				_ = json.Unmarshal(ev.Data, &m)
				text.WriteString(m.Delta)
				if strings.Contains(text.String(), "Line 02") {
					once.Do(func() { close(mid) })
				}
			}
			return nil
		})
		once.Do(func() { close(mid) })
	}()
	<-mid
	d.kill9()
	scancel()
	t0 := time.Now()
	_, c = e.startCorral(t, dir, port)
	var after strings.Builder
	var last string
	err = c.Events(ctx, r.ID, 0, func(ev store.Event) error {
		last = ev.Type
		if ev.Type == "TEXT_MESSAGE_CONTENT" {
			var m struct {
				Delta string `json:"delta"`
			}
			_ = json.Unmarshal(ev.Data, &m)
			after.WriteString(m.Delta)
		}
		return nil
	})
	if err != nil {
		return "n/a (after the restart: " + oneLine(err.Error()) + ")"
	}
	run, _ := c.Run(ctx, r.ID)
	return fmt.Sprintf("run %s (last event %s, %.1f s after the restart), %s", run.Status, last, time.Since(t0).Seconds(), lineVerdict(after.String()))
}

// peerKill prompts Claude Code through a sandbox-agent of its own,
// SIGKILLs the server once the answer's second line has arrived, starts
// it again on the same port and home, and asks for the session again.
func peerKill(t *testing.T, e *env, slow *fakemodel.Server) string {
	dir := mkdir(t, e.dir, "peer-kill")
	port := freePort(t)
	d := e.startPeer(t, dir, port, slow)
	ctx, cancel := withTimeout()
	defer cancel()
	c := newACP(d.url, "kill", "claude")
	var mu sync.Mutex
	var text strings.Builder
	mid := make(chan struct{})
	var once sync.Once
	c.setOnUpdate(func(kind string, u json.RawMessage) {
		if kind != "agent_message_chunk" {
			return
		}
		var m struct {
			Content struct {
				Text string `json:"text"`
			} `json:"content"`
		}
		_ = json.Unmarshal(u, &m)
		mu.Lock()
		text.WriteString(m.Content.Text)
		s := text.String()
		mu.Unlock()
		if strings.Contains(s, "Line 02") {
			once.Do(func() { close(mid) })
		}
	})
	sess, err := c.open(ctx, e.workCwd)
	if err != nil {
		return "n/a (session: " + oneLine(err.Error()) + ")"
	}
	promptErr := make(chan error, 1)
	go func() {
		_, err := c.prompt(ctx, sess, "Explain at length.")
		promptErr <- err
	}()
	select {
	case <-mid:
	case err := <-promptErr:
		return fmt.Sprintf("n/a (the turn ended before the kill: %v)", err)
	case <-ctx.Done():
		return "n/a (no answer)"
	}
	d.kill9()
	d2 := e.startPeer(t, dir, port, slow)
	_ = d2
	defer c.close()

	// What a client can do now: read the connection's stream again, ask
	// for the session, and wait for the rest of the answer.
	streamStatus := 0
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.url+"/v1/acp/kill", nil)
	req.Header.Set("Accept", "text/event-stream")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		streamStatus = resp.StatusCode
		resp.Body.Close()
	}
	promptStatus := 0
	body := `{"jsonrpc":"2.0","id":99,"method":"session/prompt","params":{"sessionId":"` + sess + `","prompt":[{"type":"text","text":"Go on."}]}}`
	preq, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.url+"/v1/acp/kill", strings.NewReader(body))
	preq.Header.Set("Content-Type", "application/json")
	promptAnswer := ""
	if resp, err := http.DefaultClient.Do(preq); err == nil {
		promptStatus = resp.StatusCode
		var p struct {
			Title  string `json:"title"`
			Detail string `json:"detail"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&p)
		resp.Body.Close()
		if p.Title != "" || p.Detail != "" {
			promptAnswer = " (" + oneLine(strings.TrimSpace(p.Title+": "+p.Detail)) + ")"
		}
	}
	pending := "the first prompt still pending"
	select {
	case err := <-promptErr:
		pending = fmt.Sprintf("the first prompt failed (%s)", oneLine(fmt.Sprint(err)))
	case <-time.After(10 * time.Second):
	}
	mu.Lock()
	got := text.String()
	mu.Unlock()
	verdict := lineVerdict(got)
	outcome := "turn lost"
	if verdict == "all 40 lines of the answer, each once" {
		outcome = "turn completes"
	}
	return fmt.Sprintf("%s: after the restart GET /v1/acp/kill → %d, a prompt on the session → %d%s; %s; %s after 10 s",
		outcome, streamStatus, promptStatus, promptAnswer, verdict, pending)
}
