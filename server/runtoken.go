package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// Run tokens are derived, not stored: a run's tools token is
//
//	corral-rt1.<base64url run id>.<base64url MAC>
//
// where MAC is HMAC-SHA256 under the daemon's key (the gateway key,
// gateway.key in the state directory, under its own domain label) over
// the label, the run id, its tenant and its journal nonce (random per
// run, kept in the run record). Every replica with the same key file
// checks one against the store; nothing is written per run. A run token
// is good for one route only, POST /v1/runs/{its run}/mcp, and only while
// its run is not terminal: it cannot list runs, start one, read events or
// reach another run's tools.
const runTokenPrefix = "corral-rt1."

// AgentTools mints and checks runs' tools tokens and says where sandboxes
// reach the daemon's tools. It implements run.AgentTools: give the same
// value to run.Options.Tools and Options.Tools.
type AgentTools struct {
	key   []byte
	reach map[string]string
	log   *slog.Logger
	said  sync.Map // providers already told they cannot reach the tools
}

var _ run.AgentTools = (*AgentTools)(nil)

// NewAgentTools returns the tools of a daemon with key (at least 16
// bytes) whose address, as sandboxes of each provider reach it, is
// reach[provider] (a base URL: "http://127.0.0.1:7777"). A provider
// missing from reach gets no tools; logger is told so once per provider.
func NewAgentTools(key []byte, reach map[string]string, logger *slog.Logger) (*AgentTools, error) {
	if len(key) < 16 {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "server.tools", "", "a tools key of at least 16 bytes is required")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := make(map[string]string, len(reach))
	for p, u := range reach {
		r[p] = strings.TrimRight(u, "/")
	}
	return &AgentTools{key: append([]byte(nil), key...), reach: r, log: logger}, nil
}

// Endpoint returns the run's tools URL as a sandbox of the provider
// reaches it.
func (t *AgentTools) Endpoint(provider string, rec store.Run) (string, bool) {
	base, ok := t.reach[provider]
	if !ok {
		if _, said := t.said.LoadOrStore(provider, true); !said {
			t.log.Warn("server: the checkpoint tools are not given to agents in sandboxes of this provider: they cannot reach the daemon", "provider", provider)
		}
		return "", false
	}
	return base + "/v1/runs/" + rec.ID + "/mcp", true
}

// Token returns the run's tools token.
func (t *AgentTools) Token(rec store.Run) string {
	return runTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(rec.ID)) + "." + base64.RawURLEncoding.EncodeToString(t.mac(rec))
}

func (t *AgentTools) mac(rec store.Run) []byte {
	m := hmac.New(sha256.New, t.key)
	for _, part := range []string{"corral-rt1", rec.ID, rec.Tenant, rec.JournalNonce} {
		m.Write([]byte(part))
		m.Write([]byte{0})
	}
	return m.Sum(nil)[:24]
}

// isRunToken reports whether a bearer token has a run token's form.
func isRunToken(tok string) bool { return strings.HasPrefix(tok, runTokenPrefix) }

// checkRunToken returns the run whose tools the token opens, when it is
// the token of run id and that run is live; otherwise why not, fit to
// show the caller (it names no key and no other run).
func (t *AgentTools) checkRunToken(ctx context.Context, st store.Store, tok, id string) (store.Run, string, error) {
	const bad = "not a valid run token"
	parts := strings.Split(strings.TrimPrefix(tok, runTokenPrefix), ".")
	if len(parts) != 2 {
		return store.Run{}, bad, nil
	}
	rid, err := base64.RawURLEncoding.Strict().DecodeString(parts[0])
	if err != nil {
		return store.Run{}, bad, nil
	}
	if string(rid) != id {
		return store.Run{}, "a run token is good only for its own run's tools (POST /v1/runs/{its run}/mcp)", nil
	}
	rec, ok, err := st.GetRun(ctx, id)
	if err != nil {
		return store.Run{}, "", err
	}
	// The whole token, compared in constant time: a second spelling of
	// the same bytes (base64's spare bits) is not the token.
	if !ok || !hmac.Equal([]byte(tok), []byte(t.Token(rec))) {
		return store.Run{}, bad, nil
	}
	if rec.Status.Terminal() {
		return store.Run{}, "the run has ended: its token is void", nil
	}
	return rec, "", nil
}

// authTools authenticates the tools route: a tenant token as auth does,
// or the run's own tools token (Options.Tools), which puts the request in
// the run's tenant.
func (s *Server) authTools(h http.HandlerFunc) http.HandlerFunc {
	withTenant := s.auth(h)
	return func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !isRunToken(tok) || s.opts.Tools == nil {
			withTenant(w, r)
			return
		}
		rec, why, err := s.opts.Tools.checkRunToken(r.Context(), s.st, tok, r.PathValue("id"))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if why != "" {
			s.refuseRunToken(w, why)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, rec.Tenant)))
	}
}

// refuseRunToken answers a request whose run token does not open it: 403.
func (s *Server) refuseRunToken(w http.ResponseWriter, why string) {
	s.metrics.refused.WithLabelValues("run-token").Inc()
	writeJSON(w, http.StatusForbidden, api.Error{Code: sandbox.PermissionDenied.String(), Message: why})
}

// ToolsHandler serves the agents' tools route alone, and only to run
// tokens: the handler for an address that sandboxes reach (the docker0
// bridge), where no other route of the API and no tenant token may be
// used. It needs Options.Tools.
func (s *Server) ToolsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/runs/{id}/mcp", func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if s.opts.Tools == nil || !isRunToken(tok) {
			s.refuseRunToken(w, "this address serves only the agents' tools, to their runs' tokens")
			return
		}
		s.authTools(s.toolsMCP)(w, r)
	})
	return s.guard(mux)
}
