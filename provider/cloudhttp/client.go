// Package cloudhttp is the HTTP and WebSocket client corral's cloud
// providers share, so that each provider holds only what is its own (its
// paths, its JSON, its semantics).
//
// What every call gets:
//
//   - Auth headers on every request and WebSocket upgrade, never in a log
//     line or an error text (secret values are scrubbed from backend
//     messages too, in case a backend echoes them).
//   - A deadline (Options.Timeout unless the context's is sooner).
//   - Retries with jittered exponential backoff on 429, 502, 503, 504 and
//     connection failures, honouring Retry-After — only where the call is
//     idempotent (GET, HEAD, PUT, DELETE, OPTIONS, or Request.Idempotent).
//     A non-idempotent call is retried only when it surely never reached
//     the backend (the connection was refused).
//   - Create, for calls that make something: an outcome that is unknown (a
//     timeout, a reset, a 5xx after the backend may have accepted it) is
//     reconciled by the provider's lookup by name or label, never retried
//     into a second sandbox.
//   - One table from HTTP status to corral error code (CodeForStatus), and
//     the backend's request id and message in the error.
//   - A base URL that tests point at a loopback fake.
package cloudhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/d10ffeed/corral/sandbox"
)

// Options configure a Client.
type Options struct {
	// Provider names the backend in errors and logs ("e2b").
	Provider string
	// BaseURL is the API's root, e.g. "https://api.e2b.dev". Required.
	BaseURL string
	// Header holds the auth headers (and any other fixed ones) sent on
	// every request and upgrade. Their values are secrets: they never
	// reach a log or an error.
	Header http.Header
	// HTTPClient is the transport; default a client with no timeout of its
	// own (deadlines come from Timeout and the context).
	HTTPClient *http.Client
	// Timeout bounds one call, retries included. Default 60s.
	Timeout time.Duration
	// Attempts bounds the tries of a retryable call. Default 4.
	Attempts int
	// MinBackoff and MaxBackoff bound the pause between tries (full
	// jitter). Defaults 200ms and 10s. A Retry-After longer than MaxBackoff
	// is honoured up to the call's deadline.
	MinBackoff, MaxBackoff time.Duration
	// RequestIDHeaders are the response headers that carry the backend's
	// request id, first found wins. Default x-request-id, x-amzn-requestid,
	// cf-ray.
	RequestIDHeaders []string
	// Message extracts the backend's error message from an error body.
	// Default: a JSON "message", "error" (string or {message}) or "detail"
	// field, else the body's first 300 bytes.
	Message func(body []byte) string
	// Log receives one debug line per attempt (method, path, status,
	// duration, attempt), never headers or bodies. Default: discarded.
	Log *slog.Logger
	// Sleep waits between tries; tests inject it. Default: a timer that
	// ends early with the context.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a number in [0, 1); tests inject it. Default rand.
	Jitter func() float64
}

// Client calls one backend's API.
type Client struct {
	o    Options
	base *url.URL
}

// New returns a client for opts.
func New(opts Options) (*Client, error) {
	if opts.Provider == "" {
		opts.Provider = "cloud"
	}
	if opts.BaseURL == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, opts.Provider+".client", "", "no API base URL")
	}
	base, err := url.Parse(strings.TrimRight(opts.BaseURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, opts.Provider+".client", "", "bad API base URL %q: want http(s)://host[/path]", opts.BaseURL)
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 4
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 200 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 10 * time.Second
	}
	if opts.RequestIDHeaders == nil {
		opts.RequestIDHeaders = []string{"X-Request-Id", "X-Amzn-Requestid", "Cf-Ray"}
	}
	if opts.Message == nil {
		opts.Message = DefaultMessage
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Sleep == nil {
		opts.Sleep = sleep
	}
	if opts.Jitter == nil {
		opts.Jitter = rand.Float64
	}
	opts.Header = opts.Header.Clone()
	return &Client{o: opts, base: base}, nil
}

// BaseURL returns the API root the client calls.
func (c *Client) BaseURL() string { return c.base.String() }

// Request is one API call.
type Request struct {
	// Op names the operation in errors ("e2b.create").
	Op string
	// ID is the sandbox (or other object) the call is about, for errors.
	ID     string
	Method string
	// Path is joined to the base URL; it may carry a query.
	Path  string
	Query url.Values
	// Header is added to the client's headers for this call.
	Header http.Header
	// JSON, when non-nil, is encoded as the body (Content-Type
	// application/json). Body, when non-nil, is sent as is.
	JSON any
	Body []byte
	// ContentType of Body; default application/octet-stream.
	ContentType string
	// Idempotent marks a call that may be retried although its method is
	// not idempotent by definition (a POST that looks up or kills).
	Idempotent bool
	// Timeout overrides Options.Timeout for this call.
	Timeout time.Duration
}

func (r Request) idempotent() bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodOptions:
		return true
	}
	return r.Idempotent
}

// Response is what a call returned.
type Response struct {
	Status    int
	Header    http.Header
	Body      []byte
	RequestID string
}

// Do makes the call, with retries where it is safe, and decodes a JSON
// answer into out when out is non-nil. A status of 400 or above is an error
// carrying the code of CodeForStatus.
func (c *Client) Do(ctx context.Context, req Request, out any) (*Response, error) {
	if err := c.check(req); err != nil {
		return nil, err
	}
	ctx, cancel := c.deadline(ctx, req)
	defer cancel()
	resp, err := c.retry(ctx, req, req.idempotent())
	if err != nil {
		return resp, err
	}
	return resp, c.decode(req, resp, out)
}

// Create makes a call that creates something. It is sent once; when its
// outcome is unknown — the connection broke after the request went out, the
// call timed out, or the backend answered 408, 425, 500, 502, 503 or 504 —
// reconcile is asked whether the thing exists (by the name or label the
// request gave it). Found: Create returns with reconcile's result (out is
// left to reconcile to fill). Not found: the create is tried again after a
// pause, up to Options.Attempts times. A 429 is retried after Retry-After
// (the backend refused it). Any other answer is final.
func (c *Client) Create(ctx context.Context, req Request, out any, reconcile func(ctx context.Context) (bool, error)) error {
	if err := c.check(req); err != nil {
		return err
	}
	ctx, cancel := c.deadline(ctx, req)
	defer cancel()
	var last error
	for attempt := 1; attempt <= c.o.Attempts; attempt++ {
		resp, err := c.once(ctx, req, attempt)
		if err == nil && resp.Status < 400 {
			return c.decode(req, resp, out)
		}
		var wait time.Duration
		switch {
		case err != nil && ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
			return c.transportError(ctx, req, err)
		case err != nil && refused(err):
			last = c.transportError(ctx, req, err) // never sent: retry
		case err == nil && resp.Status == http.StatusTooManyRequests:
			last = c.statusError(req, resp)
			wait = retryAfter(resp.Header)
		case err == nil && !unknownOutcome(resp.Status):
			return c.statusError(req, resp)
		default:
			// Unknown outcome: look before trying again.
			if err != nil {
				last = c.transportError(ctx, req, err)
			} else {
				last = c.statusError(req, resp)
			}
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), c.o.Timeout)
			found, rerr := reconcile(rctx)
			rcancel()
			if rerr != nil {
				return sandbox.Wrap(sandbox.CodeOf(last), req.Op, req.ID, fmt.Errorf("the create's outcome is unknown (%v) and looking it up failed: %w", last, rerr))
			}
			if found {
				c.o.Log.Debug("cloudhttp: create reconciled", "provider", c.o.Provider, "op", req.Op, "attempt", attempt)
				return nil
			}
		}
		if attempt == c.o.Attempts || ctx.Err() != nil {
			break
		}
		if err := c.pause(ctx, attempt, wait); err != nil {
			return last
		}
	}
	return last
}

// Stream makes the call and returns the response with its body unread, for
// streamed answers (NDJSON logs, server-sent events). Retries happen only
// before a response arrives, and only where the call is idempotent. The
// caller closes the body; the context bounds the whole stream (no
// Options.Timeout is applied). A status of 400 or above is an error and the
// body is closed.
func (c *Client) Stream(ctx context.Context, req Request) (*http.Response, error) {
	if err := c.check(req); err != nil {
		return nil, err
	}
	var last error
	for attempt := 1; attempt <= c.o.Attempts; attempt++ {
		hreq, err := c.newRequest(ctx, req)
		if err != nil {
			return nil, err
		}
		began := time.Now()
		resp, err := c.o.HTTPClient.Do(hreq)
		if err != nil {
			last = c.transportError(ctx, req, err)
			if ctx.Err() != nil || !(req.idempotent() || refused(err)) {
				return nil, last
			}
		} else {
			c.logAttempt(req, attempt, resp.StatusCode, began)
			if resp.StatusCode < 400 {
				return resp, nil
			}
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			r := &Response{Status: resp.StatusCode, Header: resp.Header, Body: body, RequestID: c.requestID(resp.Header)}
			last = c.statusError(req, r)
			if !req.idempotent() || !retryable(resp.StatusCode) {
				return nil, last
			}
		}
		if attempt < c.o.Attempts {
			if err := c.pause(ctx, attempt, 0); err != nil {
				return nil, last
			}
		}
	}
	return nil, last
}

// Dial opens a WebSocket to path (relative to the base URL; http becomes
// ws, https wss) with the client's headers on the upgrade. opts may be
// nil; its HTTPHeader is merged over the client's.
func (c *Client) Dial(ctx context.Context, op, path string, opts *websocket.DialOptions) (*websocket.Conn, error) {
	u, err := c.resolve(path, nil)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.InvalidArgument, op, "", err)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	}
	o := websocket.DialOptions{}
	if opts != nil {
		o = *opts
	}
	h := c.o.Header.Clone()
	for k, v := range o.HTTPHeader {
		h[k] = v
	}
	o.HTTPHeader = h
	if o.HTTPClient == nil {
		o.HTTPClient = c.o.HTTPClient
	}
	conn, resp, err := websocket.Dial(ctx, u.String(), &o)
	if err != nil {
		if resp != nil && resp.StatusCode >= 400 {
			body := []byte(nil)
			if resp.Body != nil {
				body, _ = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
				resp.Body.Close()
			}
			return nil, c.statusError(Request{Op: op, Method: "GET", Path: path}, &Response{Status: resp.StatusCode, Header: resp.Header, Body: body, RequestID: c.requestID(resp.Header)})
		}
		return nil, c.transportError(ctx, Request{Op: op, Method: "GET", Path: path}, err)
	}
	return conn, nil
}

// check refuses a request that cannot be built (a bad path, a body that
// does not encode): such an error is final, never retried.
func (c *Client) check(req Request) error {
	if _, err := c.resolve(req.Path, req.Query); err != nil {
		return sandbox.Wrap(sandbox.InvalidArgument, req.Op, req.ID, err)
	}
	if req.JSON != nil {
		if _, err := json.Marshal(req.JSON); err != nil {
			return sandbox.Wrap(sandbox.InvalidArgument, req.Op, req.ID, err)
		}
	}
	return nil
}

func (c *Client) deadline(ctx context.Context, req Request) (context.Context, context.CancelFunc) {
	t := c.o.Timeout
	if req.Timeout > 0 {
		t = req.Timeout
	}
	return context.WithTimeout(ctx, t)
}

// retry runs the call until it succeeds, fails for good, or runs out of
// attempts.
func (c *Client) retry(ctx context.Context, req Request, idempotent bool) (*Response, error) {
	var last error
	var resp *Response
	for attempt := 1; attempt <= c.o.Attempts; attempt++ {
		var err error
		resp, err = c.once(ctx, req, attempt)
		var wait time.Duration
		switch {
		case err != nil:
			last = c.transportError(ctx, req, err)
			if ctx.Err() != nil || !(idempotent || refused(err)) {
				return nil, last
			}
		case resp.Status >= 400:
			last = c.statusError(req, resp)
			if !retryable(resp.Status) || !(idempotent || resp.Status == http.StatusTooManyRequests) {
				return resp, last
			}
			wait = retryAfter(resp.Header)
		default:
			return resp, nil
		}
		if attempt == c.o.Attempts {
			break
		}
		if err := c.pause(ctx, attempt, wait); err != nil {
			return resp, last
		}
	}
	return resp, last
}

// once makes one attempt and reads the whole answer (bounded at 64 MiB).
func (c *Client) once(ctx context.Context, req Request, attempt int) (*Response, error) {
	hreq, err := c.newRequest(ctx, req)
	if err != nil {
		return nil, err
	}
	began := time.Now()
	resp, err := c.o.HTTPClient.Do(hreq)
	if err != nil {
		c.logAttempt(req, attempt, 0, began)
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	c.logAttempt(req, attempt, resp.StatusCode, began)
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: body, RequestID: c.requestID(resp.Header)}, nil
}

func (c *Client) newRequest(ctx context.Context, req Request) (*http.Request, error) {
	u, err := c.resolve(req.Path, req.Query)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.InvalidArgument, req.Op, req.ID, err)
	}
	var body io.Reader
	ctype := req.ContentType
	switch {
	case req.JSON != nil:
		b, err := json.Marshal(req.JSON)
		if err != nil {
			return nil, sandbox.Wrap(sandbox.InvalidArgument, req.Op, req.ID, err)
		}
		body, ctype = bytes.NewReader(b), "application/json"
	case req.Body != nil:
		body = bytes.NewReader(req.Body)
		if ctype == "" {
			ctype = "application/octet-stream"
		}
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	hreq, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.InvalidArgument, req.Op, req.ID, err)
	}
	for k, v := range c.o.Header {
		hreq.Header[k] = v
	}
	for k, v := range req.Header {
		hreq.Header[k] = v
	}
	if ctype != "" {
		hreq.Header.Set("Content-Type", ctype)
	}
	if hreq.Header.Get("Accept") == "" {
		hreq.Header.Set("Accept", "application/json")
	}
	return hreq, nil
}

func (c *Client) resolve(path string, q url.Values) (*url.URL, error) {
	rel, err := url.Parse(path)
	if err != nil || rel.IsAbs() || rel.Host != "" {
		return nil, fmt.Errorf("bad API path %q", path)
	}
	u := *c.base
	u.Path = strings.TrimRight(c.base.Path, "/") + "/" + strings.TrimLeft(rel.Path, "/")
	u.RawPath = ""
	vals := rel.Query()
	for k, v := range q {
		vals[k] = append(vals[k], v...)
	}
	u.RawQuery = vals.Encode()
	return &u, nil
}

func (c *Client) decode(req Request, resp *Response, out any) error {
	if out == nil || len(bytes.TrimSpace(resp.Body)) == 0 {
		return nil
	}
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return sandbox.Errorf(sandbox.Internal, req.Op, req.ID, "%s answered %d with a body that is not the JSON expected (%v)%s", c.o.Provider, resp.Status, err, c.ridSuffix(resp.RequestID))
	}
	return nil
}

func (c *Client) pause(ctx context.Context, attempt int, retryAfter time.Duration) error {
	d := c.o.MinBackoff << (attempt - 1)
	if d > c.o.MaxBackoff || d <= 0 {
		d = c.o.MaxBackoff
	}
	d = time.Duration(c.o.Jitter() * float64(d))
	if retryAfter > d {
		d = retryAfter
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return context.DeadlineExceeded
	}
	return c.o.Sleep(ctx, d)
}

func (c *Client) logAttempt(req Request, attempt, status int, began time.Time) {
	c.o.Log.Debug("cloudhttp", "provider", c.o.Provider, "op", req.Op, "method", req.Method, "path", pathOnly(req.Path), "status", status, "attempt", attempt, "duration", time.Since(began))
}

func (c *Client) requestID(h http.Header) string {
	for _, name := range c.o.RequestIDHeaders {
		if v := h.Get(name); v != "" {
			return v
		}
	}
	return ""
}

func (c *Client) ridSuffix(id string) string {
	if id == "" {
		return ""
	}
	return " (request id " + id + ")"
}

// statusError is the error for an answer of 400 or above.
func (c *Client) statusError(req Request, resp *Response) error {
	msg := c.scrub(strings.TrimSpace(c.o.Message(resp.Body)))
	text := fmt.Sprintf("%s answered %d %s", c.o.Provider, resp.Status, http.StatusText(resp.Status))
	if msg != "" {
		text += ": " + msg
	}
	return &StatusError{Err: sandbox.Errorf(CodeForStatus(resp.Status), req.Op, req.ID, "%s%s", text, c.ridSuffix(resp.RequestID)), Status: resp.Status, RequestID: resp.RequestID, Message: msg}
}

// transportError is the error for a call that got no answer.
func (c *Client) transportError(ctx context.Context, req Request, err error) error {
	code := sandbox.Unavailable
	switch {
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		code = sandbox.Canceled
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		code = sandbox.DeadlineExceeded
	}
	// *url.Error repeats the URL, whose query may hold a token: keep only
	// the cause.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return sandbox.Errorf(code, req.Op, req.ID, "%s %s %s: %s", c.o.Provider, req.Method, pathOnly(req.Path), c.scrub(err.Error()))
}

// scrub removes the client's header values (secrets) from s.
func (c *Client) scrub(s string) string {
	for _, vs := range c.o.Header {
		for _, v := range vs {
			for _, part := range append([]string{v}, strings.Fields(v)...) {
				if len(part) >= 6 {
					s = strings.ReplaceAll(s, part, "[redacted]")
				}
			}
		}
	}
	return s
}

// StatusError is the error for an answer of 400 or above. It unwraps to a
// *sandbox.Error, so sandbox.CodeOf works.
type StatusError struct {
	Err       error
	Status    int
	RequestID string
	Message   string // the backend's message (scrubbed)
}

func (e *StatusError) Error() string { return e.Err.Error() }

// Unwrap returns the *sandbox.Error.
func (e *StatusError) Unwrap() error { return e.Err }

// StatusOf returns the HTTP status of err when it is (or wraps) a
// StatusError, else 0.
func StatusOf(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status
	}
	return 0
}

// CodeForStatus is the one table from HTTP status to corral error code.
func CodeForStatus(status int) sandbox.Code {
	switch status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		return sandbox.InvalidArgument
	case http.StatusUnauthorized, http.StatusForbidden:
		return sandbox.PermissionDenied
	case http.StatusNotFound, http.StatusGone:
		return sandbox.NotFound
	case http.StatusConflict:
		return sandbox.AlreadyExists
	case http.StatusPreconditionFailed, http.StatusLocked, http.StatusTooEarly:
		return sandbox.FailedPrecondition
	case http.StatusTooManyRequests, http.StatusPaymentRequired, http.StatusInsufficientStorage:
		return sandbox.ResourceExhausted
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return sandbox.DeadlineExceeded
	case http.StatusNotImplemented, http.StatusMethodNotAllowed:
		return sandbox.Unimplemented
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return sandbox.Unavailable
	}
	switch {
	case status >= 500:
		return sandbox.Internal
	case status >= 400:
		return sandbox.InvalidArgument
	}
	return sandbox.OK
}

// retryable reports the statuses worth another try of an idempotent call.
func retryable(status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusRequestTimeout:
		return true
	}
	return false
}

// unknownOutcome reports the answers after which a create may or may not
// have happened.
func unknownOutcome(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// refused reports a transport error that means the request never left:
// the connection could not be made.
func refused(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

// retryAfter reads Retry-After (seconds or an HTTP date); 0 when absent.
func retryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// DefaultMessage extracts a backend's error message: a JSON "message",
// "error" (a string, or an object with a message) or "detail" field, else
// the body's first 300 bytes.
func DefaultMessage(body []byte) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) == nil {
		for _, k := range []string{"message", "error", "detail", "msg"} {
			raw, ok := m[k]
			if !ok {
				continue
			}
			var s string
			if json.Unmarshal(raw, &s) == nil && s != "" {
				return s
			}
			var inner struct {
				Message string `json:"message"`
			}
			if json.Unmarshal(raw, &inner) == nil && inner.Message != "" {
				return inner.Message
			}
		}
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

func pathOnly(p string) string {
	if i := strings.IndexByte(p, '?'); i >= 0 {
		return p[:i]
	}
	return p
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
