package server

import (
	_ "embed"
	"net/http"
)

//go:embed web/index.html
var indexHTML []byte

// page serves the web page, a console: the run list, threads as
// conversations (live), approvals, sandboxes, a form to start a run.
// It holds no data and needs no token; it takes the token from ?token=
// (the address corral serve prints), keeps it in sessionStorage, removes
// it from the address bar and sends it as a bearer token. It may not be
// framed, and its address (with the token) is sent nowhere as a referrer.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write(indexHTML)
}
