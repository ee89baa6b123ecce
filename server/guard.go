package server

// What stands between a web page the user visits and the daemon. A page
// on another site can make the browser send requests to 127.0.0.1 (no-cors
// fetches, form posts, images) and, through DNS rebinding, can even read
// the answers under a name of its own. So, on every route:
//   - Host must name this daemon (loopback, the address the connection came
//     in on, or a configured name): a rebound name is refused;
//   - a browser request from another origin (Origin, Sec-Fetch-Site) is
//     refused;
//   - writes must be application/json, which no form and no no-cors fetch
//     can send;
// and the API and /metrics need a bearer token unless NoAuth.

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/sandbox"
)

// guard applies the Host, origin and content-type rules before any route.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r) {
			s.refuse(w, r, "host", http.StatusForbidden, fmt.Sprintf("Host %q does not name this daemon (a DNS-rebinding page?); start it with --allow-host NAME to serve under another name", r.Host))
			return
		}
		if msg := s.crossOrigin(r); msg != "" {
			s.refuse(w, r, "origin", http.StatusForbidden, msg)
			return
		}
		if !safeMethod(r.Method) && !isJSON(r.Header.Get("Content-Type")) {
			s.refuse(w, r, "content-type", http.StatusUnsupportedMediaType, fmt.Sprintf("%s wants Content-Type: application/json (got %q)", r.Method, r.Header.Get("Content-Type")))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuse answers a refused request with a JSON error and counts it.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, reason string, status int, msg string) {
	s.metrics.refused.WithLabelValues(reason).Inc()
	// A page that floods the daemon must not flood its log: the 1st, 2nd,
	// 4th, 8th… refusal is a warning, the rest are debug lines (the metric
	// counts them all).
	level := slog.LevelDebug
	if n := s.refusals.Add(1); n&(n-1) == 0 {
		level = slog.LevelWarn
	}
	s.log.Log(r.Context(), level, "server: request refused", "reason", reason, "method", r.Method, "path", r.URL.Path, "host", r.Host, "origin", r.Header.Get("Origin"), "refused so far", s.refusals.Load())
	code := sandbox.PermissionDenied
	if status == http.StatusUnsupportedMediaType {
		code = sandbox.InvalidArgument
	}
	writeJSON(w, status, api.Error{Code: code.String(), Message: msg})
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// splitHost splits a Host header (or an allowed name) into a lower-case
// name without brackets or a trailing dot, and its port ("" when absent).
func splitHost(h string) (name, port string) {
	name = h
	if n, p, err := net.SplitHostPort(h); err == nil {
		name, port = n, p
	}
	name = strings.TrimSuffix(strings.Trim(strings.ToLower(name), "[]"), ".")
	return name, port
}

// hostAllowed reports whether the request's Host names this daemon: a
// loopback name (localhost, 127.0.0.0/8, ::1 — on any port, so an SSH
// tunnel works; a web page cannot make a browser send those for a name of
// its own), the address the connection came in on, or an AllowedHosts
// entry ("name" for any port, "name:port", or "*" for any Host).
func (s *Server) hostAllowed(r *http.Request) bool {
	if r.Host == "" {
		return false
	}
	name, port := splitHost(r.Host)
	if name == "" {
		return false
	}
	for _, a := range s.opts.AllowedHosts {
		if a == "*" {
			return true
		}
		an, ap := splitHost(a)
		if an == name && (ap == "" || ap == port) {
			return true
		}
	}
	ip := net.ParseIP(name)
	if name == "localhost" || (ip != nil && ip.IsLoopback()) {
		return true
	}
	la, _ := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	if ip == nil || la == nil || !ip.Equal(la.IP) {
		return false
	}
	if port == "" {
		port = "80"
		if r.TLS != nil {
			port = "443"
		}
	}
	return port == strconv.Itoa(la.Port)
}

// crossOrigin returns why a browser request from another origin is
// refused, or "" for a request from the daemon's own page, from an
// AllowedOrigins entry, or from no browser at all (no Origin, no
// Sec-Fetch-Site: curl, the Go client).
func (s *Server) crossOrigin(r *http.Request) string {
	origin := r.Header.Get("Origin")
	if origin != "" && s.originListed(origin) {
		return ""
	}
	if origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return fmt.Sprintf("cross-origin request from %q refused: only this daemon's own page (or an origin given with --allow-origin) may call it", origin)
		}
	}
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
		return ""
	default:
		return fmt.Sprintf("a %s browser request refused: only this daemon's own page (or an origin given with --allow-origin) may call it", site)
	}
}

func (s *Server) originListed(origin string) bool {
	for _, a := range s.opts.AllowedOrigins {
		if strings.EqualFold(strings.TrimRight(a, "/"), origin) {
			return true
		}
	}
	return false
}

type tenantKey struct{}

func tenantOf(r *http.Request) string {
	t, _ := r.Context().Value(tenantKey{}).(string)
	return t
}

// tenantFor returns the tenant of a bearer token, comparing in constant
// time.
func (s *Server) tenantFor(tok string) (string, bool) {
	tenant, found := "", false
	for known, t := range s.opts.Tokens {
		if subtle.ConstantTimeCompare([]byte(known), []byte(tok)) == 1 {
			tenant, found = t, true
		}
	}
	return tenant, found && tok != ""
}

// auth resolves the bearer token (or ?access_token=) to a tenant; with
// NoAuth every request is in the default tenant.
func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.opts.NoAuth {
			tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok {
				tok = r.URL.Query().Get("access_token")
			}
			if isRunToken(tok) {
				s.refuseRunToken(w, "a run token is good only for its own run's tools (POST /v1/runs/{its run}/mcp), not for "+r.Method+" "+r.URL.Path)
				return
			}
			tenant, known := s.tenantFor(tok)
			if !known {
				s.metrics.refused.WithLabelValues("token").Inc()
				w.Header().Set("WWW-Authenticate", `Bearer realm="corral"`)
				writeJSON(w, http.StatusUnauthorized, api.Error{Code: sandbox.PermissionDenied.String(), Message: "a valid bearer token is required (corral serve prints its page's address with the token; clients on this machine read it from the state directory)"})
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant))
		}
		h(w, r)
	}
}
