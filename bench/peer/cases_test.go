//go:build peerbench

package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/client"
	"github.com/d10ffeed/corral/store"
)

// corralPlain runs echo hi and times the first output and the end. The
// run is started and followed on one request (client.StartEvents), as
// corral run --server does.
func corralPlain(ctx context.Context, c *client.Client, thread string) (time.Duration, time.Duration, error) {
	t0 := time.Now()
	var first time.Duration
	_, err := c.StartEvents(ctx, api.StartRun{Thread: thread, Args: []string{"echo", "hi"}}, nil, func(ev store.Event) error {
		if first == 0 && ev.Type == "TEXT_MESSAGE_CONTENT" {
			first = time.Since(t0)
		}
		return nil
	})
	done := time.Since(t0)
	if err == nil && first == 0 {
		err = errors.New("no output")
	}
	return first, done, err
}

// corralAgent starts an agent run and times its first text; it returns
// once the run has ended.
func corralAgent(ctx context.Context, c *client.Client, req api.StartRun) (time.Duration, error) {
	t0 := time.Now()
	var first time.Duration
	var failed string
	id, err := c.StartEvents(ctx, req, nil, func(ev store.Event) error {
		if first == 0 && ev.Type == "TEXT_MESSAGE_CONTENT" {
			first = time.Since(t0)
		}
		if ev.Type == "RUN_ERROR" {
			failed = string(ev.Data)
		}
		return nil
	})
	if err == nil && failed != "" {
		se, _ := c.Stderr(ctx, id)
		err = errors.New("run failed: " + failed + "; stderr: " + tail(se, 600))
	}
	if err == nil && first == 0 {
		err = errors.New("no text")
	}
	return first, err
}

// peerPlain starts echo hi through the process API, follows its log
// stream to the first output, and polls the process to its exit (the
// log stream stays open after the exit, and no exit event is sent).
func peerPlain(ctx context.Context, base string) (time.Duration, time.Duration, error) {
	t0 := time.Now()
	var info struct {
		ID string `json:"id"`
	}
	if err := postJSON(ctx, base+"/v1/processes", map[string]any{"command": "echo", "args": []string{"hi"}}, &info); err != nil {
		return 0, 0, err
	}
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, base+"/v1/processes/"+info.ID+"/logs?follow=true", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	var got strings.Builder
	var first time.Duration
	for first == 0 {
		n, err := resp.Body.Read(buf)
		got.Write(buf[:n])
		if strings.Contains(got.String(), `"stream":"stdout"`) {
			first = time.Since(t0)
		}
		if err != nil && first == 0 {
			return 0, 0, fmt.Errorf("log stream: %w", err)
		}
	}
	scancel()
	for {
		var st struct {
			Status string `json:"status"`
		}
		if err := getJSON(ctx, base+"/v1/processes/"+info.ID, &st); err != nil {
			return 0, 0, err
		}
		if st.Status == "exited" {
			return first, time.Since(t0), nil
		}
		time.Sleep(500 * time.Microsecond)
	}
}

// peerTurns opens an ACP connection to agent on a fresh server id and
// prompts turns times on one session: the first turn's first text is
// timed from the connection's first request (which starts the adapter),
// the second's from its prompt (-1 when it failed).
func peerTurns(ctx context.Context, base, server, agent, cwd string, turns int) (time.Duration, time.Duration, error) {
	c := newACP(base, fmt.Sprintf("%s-%d", server, time.Now().UnixNano()), agent)
	defer func() {
		c.close()
		deletes.add(c.deleteStatus, c.deleteTook)
	}()
	var mu sync.Mutex
	var t0 time.Time
	var first time.Duration
	c.setOnUpdate(func(kind string, _ json.RawMessage) {
		mu.Lock()
		defer mu.Unlock()
		if kind == "agent_message_chunk" && first == 0 {
			first = time.Since(t0)
		}
	})
	reset := func() {
		mu.Lock()
		t0, first = time.Now(), 0
		mu.Unlock()
	}
	got := func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return first
	}
	reset()
	sess, err := c.open(ctx, cwd)
	if err != nil {
		return 0, 0, err
	}
	if _, err := c.prompt(ctx, sess, "Say something."); err != nil {
		return 0, 0, err
	}
	d1 := got()
	if d1 == 0 {
		return 0, 0, errors.New("no agent_message_chunk")
	}
	if turns < 2 {
		return d1, 0, nil
	}
	reset()
	if _, err := c.prompt(ctx, sess, "Say more."); err != nil || got() == 0 {
		return d1, -1, nil
	}
	return d1, got(), nil
}

func postJSON(ctx context.Context, u string, body, out any) error {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	return doJSON(req, out)
}

func getJSON(ctx context.Context, u string, out any) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	return doJSON(req, out)
}

func doJSON(req *http.Request, out any) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var p map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&p)
		return fmt.Errorf("%s %s: HTTP %d %v", req.Method, req.URL.Path, resp.StatusCode, p)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
