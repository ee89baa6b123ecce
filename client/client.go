// Package client is a Go client for corral's daemon (package server):
// typed calls, and run event streams that resume by themselves from the
// last event id when a connection drops — whichever replica answers next.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// Client talks to one daemon (or a load balancer in front of several).
type Client struct {
	base  string
	token string
	http  *http.Client
	// Retry is how long Events keeps reconnecting after a dropped stream
	// before giving up. Default 2 minutes.
	Retry time.Duration
}

// New returns a client for the daemon at baseURL (e.g.
// "http://127.0.0.1:7777"), authenticating with token when it is set (see
// ResolveToken for finding a local daemon's token).
func New(baseURL, token string) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "client", baseURL, "want an http(s) URL such as http://127.0.0.1:7777")
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, http: &http.Client{}, Retry: 2 * time.Minute}, nil
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil || method != http.MethodGet {
		// The daemon takes writes as JSON only (which no web form can
		// send), even those without a body.
		req.Header.Set("Content-Type", "application/json")
	}
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		return sandbox.Wrap(sandbox.Unavailable, "client."+strings.ToLower(method), path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return decodeError(resp, method+" "+path)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func (c *Client) authorize(req *http.Request) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
}

func decodeError(resp *http.Response, what string) error {
	var body api.Error
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	_ = json.Unmarshal(raw, &body)
	msg := body.Message
	if msg == "" {
		msg = strings.TrimSpace(string(raw))
	}
	if msg == "" {
		msg = resp.Status
	}
	return &sandbox.Error{Code: api.CodeOf(resp.StatusCode, body), Op: "client", ID: what, Msg: msg}
}

// Start starts a run and returns its record.
func (c *Client) Start(ctx context.Context, req api.StartRun) (api.Run, error) {
	var out api.Run
	return out, c.do(ctx, http.MethodPost, "/v1/runs", req, &out)
}

// Run returns one run.
func (c *Client) Run(ctx context.Context, id string) (api.Run, error) {
	var out api.Run
	return out, c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id), nil, &out)
}

// ListOptions filter Runs.
type ListOptions struct {
	Thread   string
	Statuses []string // e.g. "running"; empty means all
	Limit    int
}

// Runs lists runs, newest first.
func (c *Client) Runs(ctx context.Context, o ListOptions) ([]api.Run, error) {
	q := url.Values{}
	if o.Thread != "" {
		q.Set("thread", o.Thread)
	}
	if len(o.Statuses) > 0 {
		q.Set("status", strings.Join(o.Statuses, ","))
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	var out api.Runs
	err := c.do(ctx, http.MethodGet, "/v1/runs?"+q.Encode(), nil, &out)
	return out.Runs, err
}

// Active returns the thread's running run; ok is false when there is none.
func (c *Client) Active(ctx context.Context, thread string) (api.Run, bool, error) {
	var out api.Run
	err := c.do(ctx, http.MethodGet, "/v1/threads/"+url.PathEscape(thread)+"/active", nil, &out)
	if sandbox.CodeOf(err) == sandbox.NotFound {
		return api.Run{}, false, nil
	}
	return out, err == nil, err
}

// Cancel asks for a run to end; the replica that drives it acts.
func (c *Client) Cancel(ctx context.Context, id string) (api.Run, error) {
	var out api.Run
	return out, c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/cancel", nil, &out)
}

// Logs returns the run's stored events after a sequence number, without
// taking the run over.
func (c *Client) Logs(ctx context.Context, id string, after int64) ([]store.Event, error) {
	var out []store.Event
	return out, c.do(ctx, http.MethodGet, fmt.Sprintf("/v1/runs/%s/events?format=json&offset=%d", url.PathEscape(id), after), nil, &out)
}

// Sandboxes lists the caller's sandbox instances.
func (c *Client) Sandboxes(ctx context.Context) ([]api.Sandbox, error) {
	var out api.Sandboxes
	err := c.do(ctx, http.MethodGet, "/v1/sandboxes", nil, &out)
	return out.Sandboxes, err
}

// DeleteSandbox destroys a sandbox instance and its record.
func (c *Client) DeleteSandbox(ctx context.Context, key string) error {
	return c.do(ctx, http.MethodDelete, "/v1/sandboxes/"+url.PathEscape(key), nil, nil)
}

// Stderr returns the end (up to 64 KiB) of what a run's agent wrote to its
// standard error, with the run's secrets redacted.
func (c *Client) Stderr(ctx context.Context, id string) (string, error) {
	var out api.Stderr
	err := c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id)+"/stderr", nil, &out)
	return out.Stderr, err
}
