package fakecloud

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/coder/websocket"

	"github.com/d10ffeed/corral/provider/local"
)

// RequestIDHeader is the header every answer carries its request id in.
const RequestIDHeader = "X-Request-Id"

// Options configure a Server.
type Options struct {
	// BaseDir holds the sandbox directories. Default: a fresh directory
	// under os.TempDir(), removed by Close.
	BaseDir string
	// Token, when set, is the bearer token every request must carry.
	Token string
	// Kill is the kill semantics of the backend the fake imitates.
	// Default GroupKill.
	Kill KillMode
	// IDPrefix starts every sandbox id. Default "sb-".
	IDPrefix string
}

// Server is a loopback fake of a cloud backend. It is safe for concurrent
// use.
type Server struct {
	opts    Options
	ts      *httptest.Server
	mux     *http.ServeMux
	local   *local.Provider
	ownBase bool

	reqID atomic.Int64

	mu        sync.Mutex
	sandboxes map[string]*Sandbox // by id
	faults    map[string][]*Injected
	counts    map[string]int
	bodies    []Recorded
}

// Recorded is one non-empty request body the server received (REST calls
// only, first 64 KiB), kept so tests can check what reached the backend.
type Recorded struct {
	Route, Method, Path string
	Body                []byte
}

// New starts a fake on a loopback port.
func New(opts Options) (*Server, error) {
	s := &Server{opts: opts, mux: http.NewServeMux(), sandboxes: map[string]*Sandbox{},
		faults: map[string][]*Injected{}, counts: map[string]int{}}
	if s.opts.IDPrefix == "" {
		s.opts.IDPrefix = "sb-"
	}
	if s.opts.BaseDir == "" {
		dir, err := os.MkdirTemp("", "corral-fakecloud-")
		if err != nil {
			return nil, err
		}
		s.opts.BaseDir, s.ownBase = dir, true
	}
	base, err := filepath.Abs(s.opts.BaseDir)
	if err != nil {
		return nil, err
	}
	s.opts.BaseDir = base
	lp, err := local.New(local.Options{BaseDir: s.opts.BaseDir, KillGrace: 0})
	if err != nil {
		return nil, err
	}
	s.local = lp
	s.ts = httptest.NewServer(s.mux)
	return s, nil
}

// URL is the server's base URL (http://127.0.0.1:PORT).
func (s *Server) URL() string { return s.ts.URL }

// Client returns an HTTP client for the server.
func (s *Server) Client() *http.Client { return s.ts.Client() }

// Kill returns the server's kill semantics.
func (s *Server) Kill() KillMode { return s.opts.Kill }

// Close destroys every sandbox (killing its processes), drops every
// connection and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	ids := make([]string, 0, len(s.sandboxes))
	for id := range s.sandboxes {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		_, _ = s.DeleteSandbox(context.Background(), id)
	}
	s.ts.CloseClientConnections()
	s.ts.Close()
	if s.ownBase {
		_ = os.RemoveAll(s.opts.BaseDir)
	}
}

// Handle registers h for pattern (a net/http ServeMux pattern such as
// "POST /v1/sandboxes/{id}/exec") under route, the name faults and counts
// use. Every request first gets a request id, the token check, its count
// and the route's faults.
func (s *Server) Handle(route, pattern string, h http.HandlerFunc) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(RequestIDHeader, "req-"+strconv.FormatInt(s.reqID.Add(1), 10))
		s.mu.Lock()
		s.counts[route]++
		s.mu.Unlock()
		if s.opts.Token != "" && r.Header.Get("Authorization") != "Bearer "+s.opts.Token {
			WriteError(w, http.StatusUnauthorized, "missing or bad bearer token")
			return
		}
		if !isUpgrade(r) && r.Body != nil {
			// The first 64 KiB are recorded; the handler reads the whole
			// body (a real file upload has no 1 MiB bound).
			body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
			if len(body) > 0 {
				s.mu.Lock()
				s.bodies = append(s.bodies, Recorded{Route: route, Method: r.Method, Path: r.URL.Path, Body: body[:min(len(body), 64<<10)]})
				s.mu.Unlock()
			}
		}
		s.serve(route, w, r, h)
	})
}

// Count returns how many requests route has received.
func (s *Server) Count(route string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[route]
}

// Bodies returns the request bodies received so far.
func (s *Server) Bodies() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Recorded(nil), s.bodies...)
}

// WriteJSON answers status with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if v != nil {
		_ = json.NewEncoder(w).Encode(v)
	}
}

// ErrorBody is the JSON of an error answer.
type ErrorBody struct {
	// Message says what went wrong.
	Message string `json:"message"`
	// Status repeats the HTTP status.
	Status int `json:"status"`
}

// WriteError answers status with an ErrorBody.
func WriteError(w http.ResponseWriter, status int, format string, args ...any) {
	WriteJSON(w, status, ErrorBody{Message: fmt.Sprintf(format, args...), Status: status})
}

// DecodeJSON decodes the request's JSON body (at most 1 MiB) into v,
// refusing unknown fields.
func DecodeJSON(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad JSON body: %w", err)
	}
	return nil
}

// WebSocketReadLimit is the largest message AcceptWebSocket's connections
// read.
const WebSocketReadLimit = 1 << 20

// AcceptWebSocket upgrades r. The connection reads messages up to
// WebSocketReadLimit. On an error the answer has been written.
func AcceptWebSocket(w http.ResponseWriter, r *http.Request) (*websocket.Conn, error) {
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(WebSocketReadLimit)
	return c, nil
}

func isUpgrade(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}
