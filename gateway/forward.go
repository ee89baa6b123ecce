package gateway

import (
	"context"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// The forward proxy enforces a policy's egress allow-list
// (sandbox.Policy.Egress). A sandbox under one sits on a network whose
// only way out is this proxy (Docker: docker.EgressNetwork), and its agent
// gets HTTP(S)_PROXY=http://corral:<token>@GATEWAY: the token, derived
// like a placeholder (name egressName), says which run asks. CONNECT (for
// HTTPS, no interception) and plain HTTP go through only to listed hosts;
// every attempt, allowed or refused, is a Record (Kind "egress") and a
// log line, metadata only.
const egressName = "corral-egress"

// EgressProxy returns the proxy URL an agent in a sandbox of the provider
// uses under an egress allow-list.
func (g *Gateway) EgressProxy(provider string, run store.Run) (string, error) {
	addr, ok := g.o.EgressReach[provider]
	if !ok {
		// The reverse proxy's listener serves proxy requests too.
		if u, err := url.Parse(g.o.Reach[provider]); err == nil && u.Host != "" {
			addr, ok = u.Host, true
		}
	}
	if !ok {
		return "", sandbox.Errorf(sandbox.FailedPrecondition, "gateway", provider, "no egress proxy serves this provider's sandboxes")
	}
	return "http://corral:" + placeholder(g.o.Key, run, egressName) + "@" + addr, nil
}

// Forward returns the forward proxy's handler, to serve on the egress
// network's address.
func (g *Gateway) Forward() http.Handler { return http.HandlerFunc(g.serveForward) }

func (g *Gateway) serveForward(w http.ResponseWriter, r *http.Request) {
	began := time.Now()
	cw := &countingWriter{ResponseWriter: w}
	rec := Record{Kind: "egress"}
	defer func() {
		rec.Duration = time.Since(began)
		if rec.Status == 0 {
			rec.Status = cw.status
		}
		if rec.Bytes == 0 {
			rec.Bytes = cw.n
		}
		g.o.Logger.Info("gateway: egress", "run", rec.RunID, "host", rec.Host, "method", rec.Method, "status", rec.Status, "bytes", rec.Bytes,
			"duration", rec.Duration.Round(time.Millisecond), "refused", rec.Refused, "failed", rec.Failed)
		if g.o.OnRequest != nil {
			g.o.OnRequest(rec)
		}
	}()
	rec.Method = r.Method
	// A client that half-closes after its request (printf | nc) must
	// still get the answer: the server cancels r's context at the EOF, so
	// the proxy works on a context of its own, bounded.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Minute)
	defer cancel()
	r = r.WithContext(ctx)
	if r.Method == http.MethodConnect {
		// A refused CONNECT ends the connection: the bytes a client sent
		// for the tunnel are not requests to the proxy.
		cw.Header().Set("Connection", "close")
	}
	host := r.Host
	if r.Method != http.MethodConnect {
		if r.URL.Scheme != "http" || r.URL.Host == "" {
			rec.Refused = "not a proxy request (plain HTTP with an absolute URL, or CONNECT)"
			http.Error(cw, "corral gateway: "+rec.Refused, http.StatusBadRequest)
			return
		}
		host = r.URL.Host
	}
	host = strings.ToLower(host)
	if _, _, err := net.SplitHostPort(host); err != nil {
		if r.Method == http.MethodConnect {
			rec.Refused = "CONNECT needs host:port"
			http.Error(cw, "corral gateway: "+rec.Refused, http.StatusBadRequest)
			return
		}
		host += ":80"
	}
	rec.Host = host
	run, why := g.egressRun(r)
	rec.RunID = run.ID
	if why != "" {
		rec.Refused = why
		if rec.RunID == "" {
			rec.RunID = g.identify(r)
		}
		cw.Header().Set("Proxy-Authenticate", `Basic realm="corral"`)
		http.Error(cw, "corral gateway: "+why, http.StatusProxyAuthRequired)
		return
	}
	def, ok := g.o.Definition(run.DefinitionID)
	if !ok {
		rec.Refused = "the run's definition is not served here"
		http.Error(cw, "corral gateway: "+rec.Refused, http.StatusForbidden)
		return
	}
	secrets := def.Workspace.SecretsOrEmpty()
	list := def.Policy.EgressList()
	mitm := r.Method == http.MethodConnect && intercepts(secrets, host)
	// With an allow-list, only what it lists; without one (a run that
	// has the proxy for interception) anything, as the sandbox's own
	// network would.
	if len(list) > 0 && !sandbox.EgressAllows(list, host) {
		rec.Refused = "not on the egress allow-list"
		http.Error(cw, "corral gateway: "+host+" is not on the run's egress allow-list", http.StatusForbidden)
		return
	}
	if len(list) == 0 && !mitm && hostLoopback(ctx, host) {
		// The gateway runs on the host: without a list naming it, its
		// loopback services are not the sandbox's to reach.
		rec.Refused = "a loopback address of the gateway's host"
		http.Error(cw, "corral gateway: "+host+" is on the gateway host's loopback", http.StatusForbidden)
		return
	}
	if mitm {
		g.intercept(cw, r, host, run, secrets, &rec)
		return
	}
	if r.Method == http.MethodConnect {
		g.tunnel(cw, r, host, &rec)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	for _, h := range []string{"Proxy-Authorization", "Proxy-Connection"} {
		out.Header.Del(h)
	}
	if r.Body != nil {
		out.Body = http.MaxBytesReader(cw, r.Body, g.o.MaxRequestBytes)
	}
	resp, err := g.egress.RoundTrip(out)
	if err != nil {
		rec.Failed = err.Error()
		cw.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			cw.Header().Add(k, v)
		}
	}
	cw.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(flushWriter{cw}, resp.Body)
}

// identify names the run of a proxy request without valid credentials by
// its source address (Options.Identify), or counts and logs it.
func (g *Gateway) identify(r *http.Request) string {
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	if g.o.Identify != nil {
		if id, ok := g.o.Identify(r.Context(), ip); ok {
			return id
		}
	}
	g.unattributed.Add(1)
	g.o.Logger.Warn("gateway: egress attempt without credentials of no identifiable run", "source", ip, "host", r.Host)
	return ""
}

// Unattributed is how many proxy requests were refused for want of
// credentials with no run to record them in (a metric).
func (g *Gateway) Unattributed() uint64 { return g.unattributed.Load() }

// egressRun reads the proxy credentials: the run they name, or why not.
func (g *Gateway) egressRun(r *http.Request) (store.Run, string) {
	v := r.Header.Get("Proxy-Authorization")
	if len(v) < 6 || !strings.EqualFold(v[:6], "basic ") {
		return store.Run{}, "no proxy credentials (the run's HTTP_PROXY carries them)"
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v[6:]))
	if err != nil {
		return store.Run{}, "bad proxy credentials"
	}
	toks := findTokens(string(dec))
	if len(toks) != 1 || toks[0].name != egressName {
		return store.Run{}, "bad proxy credentials"
	}
	run, found, err := g.o.Runs.GetRun(r.Context(), toks[0].runID)
	if err != nil {
		return store.Run{}, "the run store failed"
	}
	if !found || !hmacEqual(toks[0].mac, mac(g.o.Key, run, egressName)) {
		return store.Run{}, "bad proxy credentials"
	}
	if run.Status.Terminal() {
		return run, "the run has ended; its proxy credentials are revoked"
	}
	return run, ""
}

// tunnel answers a CONNECT: dial, 200, then bytes both ways.
func (g *Gateway) tunnel(w *countingWriter, r *http.Request, host string, rec *Record) {
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	up, err := g.o.Dial(ctx, "tcp", host)
	cancel()
	if err != nil {
		rec.Failed = err.Error()
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer up.Close()
	conn, buf, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	rec.Status = http.StatusOK
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, io.MultiReader(buf.Reader, conn))
		if c, ok := up.(interface{ CloseWrite() error }); ok {
			_ = c.CloseWrite()
		}
		close(done)
	}()
	n, _ := io.Copy(conn, up)
	rec.Bytes = n
	_ = conn.Close()
	<-done
}

// flushWriter flushes after every write (a proxied stream).
type flushWriter struct{ w *countingWriter }

func (f flushWriter) Write(b []byte) (int, error) {
	n, err := f.w.Write(b)
	_ = http.NewResponseController(f.w.ResponseWriter).Flush()
	return n, err
}

// EgressEvent is an egress record as the run's egress.attempt event.
func (r Record) EgressEvent() event.Egress {
	return event.Egress{Method: r.Method, Host: r.Host, Allowed: r.Refused == "", Status: r.Status, Reason: r.Refused}
}

// NoteEgress returns an Options.OnRequest that records the forward
// proxy's attempts as run events through note (run.Runner.NoteEgress).
func NoteEgress(note func(runID string, e event.Egress) bool) func(Record) {
	return func(r Record) {
		if r.Kind == "egress" && r.RunID != "" {
			note(r.RunID, r.EgressEvent())
		}
	}
}

// hostLoopback reports whether host (host:port) is, or resolves to, a
// loopback or unspecified address; a name that does not resolve is not.
func hostLoopback(ctx context.Context, host string) bool {
	name, _, err := net.SplitHostPort(host)
	if err != nil {
		name = host
	}
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, strings.Trim(name, "[]"))
	if err != nil {
		return false
	}
	for _, ip := range ips {
		if ip.IP.IsLoopback() || ip.IP.IsUnspecified() {
			return true
		}
	}
	return false
}
