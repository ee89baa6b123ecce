// Package server is corral's daemon: an HTTP API with Server-Sent Event
// streams over a run.Runner, a small web page embedded in the binary, and
// Prometheus metrics. Several daemons may share one PostgreSQL store: a
// client that reconnects to any of them gets the rest of a run, and a
// replica takes over the runs of one that died.
package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// Options configure a Server.
type Options struct {
	// Runner runs the runs; its store is the server's store. Required.
	Runner *run.Runner
	// Definitions are the ids of the sandbox definitions clients may name
	// (all of them must be known to Runner). The first is the default.
	Definitions []string
	// Harnesses are the harness names clients may name.
	Harnesses []string
	// Tokens maps bearer tokens to tenants; the API and /metrics need one
	// of them. Empty is allowed only with NoAuth.
	Tokens map[string]string
	// NoAuth serves without tokens, every request in the default tenant
	// (listen on loopback only: see CheckListen). The Host, origin and
	// content-type rules stay on.
	NoAuth bool
	// AllowedHosts are names the daemon answers to besides loopback and the
	// address a connection came in on (the Host header; "name" for any
	// port, "name:port", "*" for any). Any other Host is refused, which
	// stops DNS rebinding.
	AllowedHosts []string
	// AllowedOrigins are browser origins (scheme://host[:port]) allowed to
	// call the API besides the daemon's own page.
	AllowedOrigins []string
	// Logger receives request failures and background problems.
	Logger *slog.Logger
	// MaxBody bounds request bodies. Default 1 MiB.
	MaxBody int64
	// ReapInterval is how often the reaper runs; default 1m. ReapTTL
	// cancels runs nobody watched for this long; default 30m; negative
	// never expires runs.
	ReapInterval, ReapTTL time.Duration
	// Forget tunes the retention pass that follows each reaper pass (see
	// run.Runner.Forget).
	Forget run.ForgetOptions
	// Metrics, when set, is the registry metrics go to (a fresh one
	// otherwise).
	Metrics *Metrics
	// Tools, when set, checks runs' tools tokens (give the same value to
	// run.Options.Tools, which hands them to the agents): POST
	// /v1/runs/{id}/mcp then also takes the run's own token.
	Tools *AgentTools
}

// Server is the daemon's HTTP side.
type Server struct {
	opts    Options
	st      store.Store
	log     *slog.Logger
	mux     *http.ServeMux
	metrics *Metrics
	// refusals counts refused requests, to bound the log lines they make.
	refusals atomic.Int64
}

// New returns a server.
func New(opts Options) (*Server, error) {
	if opts.Runner == nil {
		return nil, errors.New("server: Options.Runner is required")
	}
	if len(opts.Definitions) == 0 {
		return nil, errors.New("server: at least one sandbox definition is required")
	}
	for _, d := range opts.Definitions {
		if _, ok := opts.Runner.Definition(d); !ok {
			return nil, fmt.Errorf("server: definition %q is not known to the runner", d)
		}
	}
	if len(opts.Tokens) == 0 && !opts.NoAuth {
		return nil, errors.New("server: no tokens: give Options.Tokens (corral serve makes one), or set NoAuth")
	}
	if len(opts.Tokens) > 0 && opts.NoAuth {
		return nil, errors.New("server: Options.Tokens and NoAuth contradict each other")
	}
	for tok := range opts.Tokens {
		if tok == "" {
			return nil, errors.New("server: an empty token")
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = 1 << 20
	}
	if opts.ReapInterval <= 0 {
		opts.ReapInterval = time.Minute
	}
	if opts.ReapTTL == 0 {
		opts.ReapTTL = 30 * time.Minute
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics()
	}
	s := &Server{opts: opts, st: opts.Runner.Store(), log: opts.Logger, mux: http.NewServeMux(), metrics: opts.Metrics}
	s.routes()
	return s, nil
}

// Handler returns the server's HTTP handler: every route behind the Host,
// origin and content-type rules (guard.go).
func (s *Server) Handler() http.Handler { return s.guard(s.mux) }

func (s *Server) routes() {
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	s.mux.Handle("GET /metrics", s.auth(s.metrics.Handler(s.st).ServeHTTP))
	s.mux.HandleFunc("GET /{$}", s.page)
	s.mux.HandleFunc("GET /v1/definitions", s.auth(s.definitions))
	s.mux.HandleFunc("POST /v1/runs", s.auth(s.startRun))
	s.mux.HandleFunc("GET /v1/runs", s.auth(s.listRuns))
	s.mux.HandleFunc("GET /v1/runs/{id}", s.auth(s.getRun))
	s.mux.HandleFunc("GET /v1/runs/{id}/events", s.auth(s.runEvents))
	s.mux.HandleFunc("POST /v1/runs/{id}/cancel", s.auth(s.cancelRun))
	s.mux.HandleFunc("GET /v1/runs/{id}/stderr", s.auth(s.runStderr))
	s.mux.HandleFunc("POST /v1/runs/{id}/approvals", s.auth(s.answerApproval))
	s.mux.HandleFunc("GET /v1/threads/{thread}/active", s.auth(s.activeRun))
	s.mux.HandleFunc("GET /v1/threads/{thread}/checkpoints", s.auth(s.listCheckpoints))
	s.mux.HandleFunc("GET /v1/threads/{thread}/checkpoints/{id}", s.auth(s.getCheckpoint))
	s.mux.HandleFunc("POST /v1/threads/{thread}/checkpoints", s.auth(s.saveCheckpoint))
	s.mux.HandleFunc("POST /v1/threads/{thread}/fork", s.auth(s.forkThread))
	s.mux.HandleFunc("POST /v1/threads/{thread}/restore", s.auth(s.restoreCheckpoint))
	s.mux.HandleFunc("POST /v1/runs/{id}/mcp", s.authTools(s.toolsMCP))
	s.mux.HandleFunc("GET /v1/sandboxes", s.auth(s.listSandboxes))
	s.mux.HandleFunc("DELETE /v1/sandboxes/{key}", s.auth(s.deleteSandbox))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// fail writes err as a JSON error with the status of its code.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := sandbox.CodeOf(err)
	status := api.HTTPStatus(code)
	if status >= 500 {
		s.log.Error("server: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeJSON(w, status, api.Error{Code: code.String(), Message: err.Error()})
}

func badRequest(format string, args ...any) error {
	return sandbox.Errorf(sandbox.InvalidArgument, "api", "", format, args...)
}

func notFound(what, id string) error {
	return sandbox.Errorf(sandbox.NotFound, "api", id, "no such %s", what)
}

func (s *Server) definitions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.Definitions{Definitions: s.opts.Definitions, Harnesses: s.opts.Harnesses})
}

// startRun starts a run from a StartRun, or from AG-UI's RunAgentInput
// (agui.go), which may also reconnect to the run its runId names.
func (s *Server) startRun(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBody)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, api.Error{Code: sandbox.InvalidArgument.String(), Message: fmt.Sprintf("the body is larger than %d bytes", s.opts.MaxBody)})
			return
		}
		s.fail(w, r, badRequest("reading the body: %v", err))
		return
	}
	var req api.StartRun
	runID := ""
	if isAGUIInput(body) {
		if req, runID, err = fromAGUI(body); err != nil {
			s.fail(w, r, err)
			return
		}
		if s.reconnectAGUI(w, r, req.Thread, runID) {
			return
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		err = dec.Decode(&req)
		if err == nil { // one JSON object and nothing after it
			if _, terr := dec.Token(); terr == nil {
				err = errors.New("unexpected data after the JSON object")
			} else if !errors.Is(terr, io.EOF) {
				err = terr
			}
		}
		if err != nil {
			s.fail(w, r, badRequest("the body is not a valid run request: %v", err))
			return
		}
	}
	if req.Definition == "" {
		req.Definition = s.opts.Definitions[0]
	}
	if !slices.Contains(s.opts.Definitions, req.Definition) {
		s.fail(w, r, sandbox.Errorf(sandbox.NotFound, "api", req.Definition, "unknown sandbox definition (known: %s)", strings.Join(s.opts.Definitions, ", ")))
		return
	}
	if req.Harness == "" {
		req.Harness = "command"
	}
	if !slices.Contains(s.opts.Harnesses, req.Harness) {
		s.fail(w, r, badRequest("unknown harness %q (known: %s)", req.Harness, strings.Join(s.opts.Harnesses, ", ")))
		return
	}
	if strings.TrimSpace(req.Prompt) == "" && len(req.Args) == 0 {
		s.fail(w, r, badRequest("empty prompt: give a prompt (or args for the command harness)"))
		return
	}
	rec, err := s.opts.Runner.Start(context.WithoutCancel(r.Context()), run.StartRequest{
		ID: runID, Definition: req.Definition, Thread: req.Thread, Tenant: tenantOf(r), Harness: req.Harness,
		Prompt: req.Prompt, Args: req.Args, Model: req.Model, Mode: req.Mode, Auth: harness.Auth(req.Auth), Options: req.Options, Approvals: req.Approvals, MCPServers: req.MCPServers, Retention: store.Retention(req.Retention),
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.metrics.runsStarted.Inc()
	w.Header().Set("Location", "/v1/runs/"+rec.ID)
	w.Header().Set("X-Run-Id", rec.ID)
	w.Header().Set("X-Thread-Id", rec.ThreadID)
	if wantsStream(r) {
		s.stream(w, r, rec.ID, 0, false)
		return
	}
	writeJSON(w, http.StatusCreated, s.apiRun(rec, 0))
}

func wantsStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// run returns the tenant's run, or NotFound for a run of another tenant
// (404, not 403: ids don't leak).
func (s *Server) run(r *http.Request, id string) (store.Run, error) {
	rec, ok, err := s.st.GetRun(r.Context(), id)
	if err != nil {
		return store.Run{}, err
	}
	if !ok || rec.Tenant != tenantOf(r) {
		return store.Run{}, notFound("run", id)
	}
	return rec, nil
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	rec, err := s.run(r, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	last, err := s.st.LastSeq(r.Context(), rec.ID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.apiRun(rec, last))
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.RunFilter{Tenant: tenantOf(r), ThreadID: q.Get("thread"), Limit: 500}
	if st := q.Get("status"); st != "" {
		for _, one := range strings.Split(st, ",") {
			rs := store.RunStatus(one)
			if !rs.Valid() {
				s.fail(w, r, badRequest("unknown status %q", one))
				return
			}
			f.Statuses = append(f.Statuses, rs)
		}
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n <= 0 || n > 5000 {
			s.fail(w, r, badRequest("limit must be 1 to 5000"))
			return
		}
		f.Limit = n
	}
	runs, err := s.st.ListRuns(r.Context(), f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.Runs{Runs: make([]api.Run, 0, len(runs))}
	for i := len(runs) - 1; i >= 0; i-- { // newest first
		out.Runs = append(out.Runs, s.apiRun(runs[i], 0))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) activeRun(w http.ResponseWriter, r *http.Request) {
	rec, ok, err := s.st.ActiveRun(r.Context(), r.PathValue("thread"), tenantOf(r))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !ok {
		s.fail(w, r, notFound("active run for thread", r.PathValue("thread")))
		return
	}
	writeJSON(w, http.StatusOK, s.apiRun(rec, 0))
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	rec, err := s.run(r, r.PathValue("id"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rec, err = s.opts.Runner.Cancel(context.WithoutCancel(r.Context()), rec.ID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, s.apiRun(rec, 0))
}

// runEvents replays the run's events after the offset (?offset= or
// Last-Event-ID), then streams the live remainder; when no live driver
// holds the run, this replica takes it over.
func (s *Server) runEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	// A run driven here is checked against the driver's record (its
	// tenant is fixed), without a store read.
	if tenant, ok := s.opts.Runner.DrivenTenant(id); ok && tenant != tenantOf(r) {
		s.fail(w, r, notFound("run", id))
		return
	} else if !ok {
		if _, err := s.run(r, id); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	var err error
	raw := r.Header.Get("Last-Event-ID")
	if raw == "" {
		raw = r.URL.Query().Get("offset")
	}
	var after int64
	if raw != "" {
		if after, err = strconv.ParseInt(raw, 10, 64); err != nil || after < 0 {
			s.fail(w, r, badRequest("bad offset %q: want a sequence number, 0 or more", raw))
			return
		}
	}
	if !wantsStream(r) && r.URL.Query().Get("format") == "json" {
		evs, err := s.st.ReadEvents(r.Context(), id, after, 0)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, evs)
		return
	}
	s.stream(w, r, id, after, true)
}

// stream writes the run's events as Server-Sent Events, each with its
// sequence number as the event id, until the run ends or the client goes
// away (which leaves the run going). Every data frame is an AG-UI event: a
// finished stream ends with the comment ": end" and is closed (AG-UI
// clients reject a frame without an event type); a stream that fails ends
// with an "error" event whose data is a RUN_ERROR without an id (its code
// is corral's error code, e.g. Unavailable: reconnect).
func (s *Server) stream(w http.ResponseWriter, r *http.Request, runID string, after int64, takeover bool) {
	fl, ok := w.(http.Flusher)
	if !ok {
		s.fail(w, r, sandbox.Errorf(sandbox.Internal, "api", runID, "streaming is not supported by this connection"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": corral\n\n")
	fl.Flush()

	ctx := r.Context()
	var mu sync.Mutex // the keep-alive and the events write to one stream
	done, stopped := make(chan struct{}), make(chan struct{})
	// The keep-alive must be gone before the handler returns: a ping written
	// after that would go to a finished response (whose buffer net/http
	// reuses for another connection).
	defer func() { close(done); <-stopped }()
	go func() { // keep idle connections alive through proxies
		defer close(stopped)
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				mu.Lock()
				fmt.Fprint(w, ": ping\n\n")
				fl.Flush()
				mu.Unlock()
			}
		}
	}()
	// One write and one flush per batch of events (one store read or one
	// append of the driver here), not per event.
	// The buffer is written whenever it holds 64 KiB, so a batch of large
	// events is not held whole.
	var buf []byte
	write := func(evs []store.Event) error {
		mu.Lock()
		defer mu.Unlock()
		for i, e := range evs {
			buf = append(buf, "id: "...)
			buf = strconv.AppendInt(buf, e.Seq, 10)
			buf = append(buf, "\ndata: "...)
			buf = append(buf, e.Data...)
			buf = append(buf, "\n\n"...)
			if len(buf) >= 64<<10 || i == len(evs)-1 {
				_, err := w.Write(buf)
				if buf = buf[:0]; cap(buf) > 1<<20 {
					buf = nil // a huge event's room is not kept for the stream's life
				}
				if err != nil {
					return err
				}
			}
		}
		fl.Flush()
		return nil
	}
	var err error
	if takeover {
		err = s.opts.Runner.AttachBatched(ctx, runID, after, write)
	} else {
		err = s.opts.Runner.FollowBatched(ctx, runID, after, write)
	}
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("server: streaming a run failed", "run", runID, "err", err)
			fmt.Fprintf(w, "event: error\ndata: %s\n\n", event.Event{Type: event.RunError, Code: sandbox.CodeOf(err).String(), Message: err.Error()}.Marshal())
			fl.Flush()
		}
		return
	}
	fmt.Fprint(w, ": end\n\n")
	fl.Flush()
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	list, err := s.st.ListInstances(r.Context(), store.InstanceFilter{Tenant: tenantOf(r), Limit: 1000})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sbs, err := s.sandboxes(r.Context(), tenantOf(r), list)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.Sandboxes{Sandboxes: sbs})
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	in, ok, err := s.st.GetInstance(r.Context(), key)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !ok || in.Tenant != tenantOf(r) {
		s.fail(w, r, notFound("sandbox", key))
		return
	}
	def, ok := s.opts.Runner.Definition(in.DefinitionID)
	if !ok {
		s.fail(w, r, sandbox.Errorf(sandbox.FailedPrecondition, "api", key, "this daemon does not know the sandbox's definition %q", in.DefinitionID))
		return
	}
	if err := s.opts.Runner.Ensure().DestroyKey(r.Context(), def.Provider, key, def.Hooks.OnDestroy); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Reap runs reaper passes every ReapInterval until ctx ends. Every replica
// runs it; the runner's reaper lock lets one pass run at a time.
func (s *Server) Reap(ctx context.Context) {
	t := time.NewTicker(s.opts.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ttl := s.opts.ReapTTL
		if ttl < 0 {
			ttl = 0
		}
		rep, err := s.opts.Runner.Reap(ctx, run.ReapOptions{TTL: ttl})
		if err != nil {
			s.log.Warn("server: reaper pass failed", "err", err)
			continue
		}
		s.metrics.observeReap(rep)
		frep, err := s.opts.Runner.Forget(ctx, s.opts.Forget)
		if err != nil {
			s.log.Warn("server: retention pass failed", "err", err)
			continue
		}
		s.metrics.observeForget(frep)
	}
}

// CheckListen refuses to listen beyond loopback without tokens given by
// the operator (a token corral serve made itself, or --no-auth, stays on
// loopback).
func CheckListen(addr string, tokens map[string]string) error {
	if len(tokens) > 0 {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("refusing to listen on %s without auth tokens: configure --token, or listen on 127.0.0.1", addr)
	}
	return nil
}
