package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// ErrStreamError is wrapped by Events when the daemon ended a stream with
// an error event.
var ErrStreamError = errors.New("client: the daemon reported an error on the stream")

// StartEvents starts a run and follows its events on the same request
// (POST /v1/runs with Accept: text/event-stream): one round trip less
// than Start followed by Events, which is what an interactive client
// wants. started, when set, is called with the run's id and thread once
// the daemon has started it, before the first event. When the stream
// drops before the run ends, StartEvents goes on as Events does, from the
// last event received, so no event is lost or repeated. It returns the
// run's id ("" when the run was not started).
//
// A connection that fails before the daemon answers is not retried (the
// run may or may not have started): the error is Unavailable.
func (c *Client) StartEvents(ctx context.Context, req api.StartRun, started func(id, thread string), fn func(store.Event) error) (string, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/runs", bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "text/event-stream")
	c.authorize(hr)
	resp, err := c.http.Do(hr)
	if err != nil {
		return "", sandbox.Wrap(sandbox.Unavailable, "client.start", req.Thread, err)
	}
	defer resp.Body.Close()
	id := resp.Header.Get("X-Run-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusCreated {
			return "", sandbox.Errorf(sandbox.Internal, "client.start", req.Thread, "the daemon answered %s without a run id", resp.Status)
		}
		return "", decodeError(resp, "start")
	}
	if started != nil {
		started(id, resp.Header.Get("X-Thread-Id"))
	}
	last := int64(0)
	done, _, err := c.read(resp, id, func(e store.Event) error {
		last = e.Seq
		return fn(e)
	})
	if done || ctx.Err() != nil {
		if ctx.Err() != nil {
			return id, ctx.Err()
		}
		return id, err
	}
	return id, c.Events(ctx, id, last, fn)
}

// Events calls fn with the run's events after sequence number after, then
// with the live remainder, until the run ends or ctx ends. When the
// connection drops it reconnects (with Last-Event-ID) for up to Retry, so
// no event is lost or repeated.
func (c *Client) Events(ctx context.Context, id string, after int64, fn func(store.Event) error) error {
	last := after
	var lastErr error
	deadline := time.Time{}
	backoff := 100 * time.Millisecond
	for {
		done, progressed, err := c.stream(ctx, id, last, func(e store.Event) error {
			last = e.Seq
			return fn(e)
		})
		if done || ctx.Err() != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if code := sandbox.CodeOf(err); err != nil && code != sandbox.Unavailable && code != sandbox.Unknown && code != sandbox.Internal {
			return err // a real answer (not found, refused): no point retrying
		}
		lastErr = err
		if progressed {
			deadline, backoff = time.Time{}, 100*time.Millisecond
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(c.Retry)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("client: the stream of %s kept failing: %w", id, lastErr)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// stream reads one SSE connection. done is true when the run ended.
func (c *Client) stream(ctx context.Context, id string, after int64, fn func(store.Event) error) (done, progressed bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/runs/%s/events", c.base, url.PathEscape(id)), nil)
	if err != nil {
		return true, false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return false, false, sandbox.Wrap(sandbox.Unavailable, "client.events", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err := decodeError(resp, "events "+id)
		return sandbox.CodeOf(err) != sandbox.Unavailable && resp.StatusCode < 500, false, err
	}
	return c.read(resp, id, fn)
}

// read reads the events of run id from an SSE response whose status was
// OK. done is true when the run ended.
func (c *Client) read(resp *http.Response, id string, fn func(store.Event) error) (done, progressed bool, err error) {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	var evID, evName string
	var data []byte
	terminal := false // the last event delivered ends the run
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == ": end": // the daemon's end of a finished run's stream
			return true, progressed, nil
		case line == "":
			if evName == "error" {
				var e api.Error
				_ = json.Unmarshal(data, &e)
				return false, progressed, fmt.Errorf("%w: %s", ErrStreamError, e.Message)
			}
			if len(data) > 0 {
				seq, perr := strconv.ParseInt(evID, 10, 64)
				if perr != nil {
					return true, progressed, sandbox.Errorf(sandbox.Internal, "client.events", id, "event without a sequence number")
				}
				var ev struct {
					Type string `json:"type"`
				}
				_ = json.Unmarshal(data, &ev)
				terminal = ev.Type == string(event.RunFinished) || ev.Type == string(event.RunError)
				if err := fn(store.Event{RunID: id, Seq: seq, Type: ev.Type, Data: bytes.Clone(data)}); err != nil {
					return true, progressed, err
				}
				progressed = true
			}
			evID, evName, data = "", "", nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id:"):
			evID = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "event:"):
			evName = strings.TrimSpace(line[6:])
		case strings.HasPrefix(line, "data:"):
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, strings.TrimPrefix(line[5:], " ")...)
		}
	}
	if terminal && sc.Err() == nil {
		// A stream closed right after the run's last event (by a proxy
		// that drops comments, say): the run is over.
		return true, progressed, nil
	}
	return false, progressed, sandbox.Wrap(sandbox.Unavailable, "client.events", id, errors.Join(sc.Err(), io.ErrUnexpectedEOF))
}
