// Package gateway is corral's egress gateway: the one place a brokered
// secret's value is used. Sandboxes hold only per-run placeholders; the
// gateway, in the daemon (a process that outlives runs), forwards an
// agent's requests to the hosts its workspace names and puts the real
// value in the named header, for live runs only.
//
// The model APIs' CLIs accept a base URL, so the gateway is a plain HTTP
// reverse proxy on a route per run and upstream:
//
//	http://GATEWAY/r/<base64url run id>/<https|http>/<host[~port]>/<path>
//
// A request is forwarded only when it carries a placeholder of the route's
// run in the header its secret's broker names, the placeholder's MAC
// checks (see token.go), the run is not terminal and the upstream is one
// of that secret's hosts; anything else is refused with 403. Bodies are
// streamed both ways (responses flushed as they come), bounded
// (Options.MaxRequestBytes, MaxResponseBytes), and every request is logged
// as metadata only: run, host, status, bytes, duration.
package gateway

import (
	"context"
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// Options configure a Gateway.
type Options struct {
	// Key is the gateway key placeholders are derived with (see
	// LoadOrCreateKey); required, at least 16 bytes.
	Key []byte
	// Runs is where run records are read; required.
	Runs interface {
		GetRun(ctx context.Context, id string) (store.Run, bool, error)
	}
	// Definition returns the sandbox definition of an id (the run's), whose
	// workspace holds the brokered secrets; required.
	Definition func(id string) (*sandbox.Definition, bool)
	// Reach maps a provider name to the base URL its sandboxes reach the
	// gateway at, such as http://127.0.0.1:PORT for local. A provider not
	// listed cannot be given brokered secrets.
	Reach map[string]string
	// PublicURL is a base URL at which the user exposes this gateway (a
	// tunnel, an ingress) for sandboxes of providers Reach does not list,
	// such as the remote ones: their brokered secrets' routes use it.
	// Optional; it must be reachable from those sandboxes and reach this
	// gateway's reverse proxy.
	PublicURL string
	// Logger receives one line per request (metadata only). Default:
	// discard.
	Logger *slog.Logger
	// Transport sends the requests upstream; default a clone of
	// http.DefaultTransport.
	Transport http.RoundTripper
	// MaxRequestBytes bounds a request body; default 32 MiB.
	MaxRequestBytes int64
	// MaxResponseBytes bounds a response body (cut past it); default
	// 1 GiB, negative for none.
	MaxResponseBytes int64
	// OnRequest is told of every request, forwarded or refused.
	OnRequest func(Record)
	// EgressReach maps a provider name to the host:port its sandboxes
	// reach the forward proxy (Forward) at; a provider not listed cannot
	// run under an egress allow-list.
	EgressReach map[string]string
	// Identify names the run whose sandbox has the source address ip (the
	// agent's address on the egress network), for proxy requests that
	// carry no valid credentials: their refusal (407) becomes that run's
	// egress.attempt event. Optional; a refusal no run is found for is
	// counted (Unattributed) and logged.
	Identify func(ctx context.Context, ip string) (runID string, ok bool)
	// Lookup resolves the listed names ServeDNS answers ("ip4" or
	// "ip6"); default the host's resolver.
	Lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)
	// Dial connects to allowed egress hosts; default a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Record is the metadata of one request through the gateway: never a
// header or a body.
type Record struct {
	// Kind is "model" (the reverse proxy) or "egress" (the forward
	// proxy).
	Kind     string
	Method   string
	RunID    string
	Host     string
	Status   int
	Bytes    int64 // response body bytes sent to the agent
	Duration time.Duration
	// Refused says why the gateway answered 403 itself; empty when the
	// request was forwarded.
	Refused string
	// Failed is why an allowed request did not reach its upstream (a
	// dial or transport error); empty otherwise.
	Failed string
}

// Gateway is the egress gateway; it is an http.Handler.
type Gateway struct {
	o      Options
	proxy  *httputil.ReverseProxy
	egress *http.Transport // the forward proxy's, dialling with Options.Dial
	cas    authorities     // the sandboxes' CAs of interception (mitm.go)
	relay  bool            // plain-HTTP upstreams take the relay (relay.go): no custom Transport
	// unattributed counts refused proxy requests of no identifiable run.
	unattributed atomic.Uint64
}

// New returns a gateway.
func New(o Options) (*Gateway, error) {
	if len(o.Key) < 16 || o.Runs == nil || o.Definition == nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "gateway.new", "", "key (16 bytes at least), runs and definitions are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	relay := o.Transport == nil
	if o.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil // the gateway is the way out; it follows no proxy of its own environment
		t.ResponseHeaderTimeout = 10 * time.Minute
		o.Transport = t
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = 32 << 20
	}
	if o.MaxResponseBytes == 0 {
		o.MaxResponseBytes = 1 << 30
	}
	if o.Lookup == nil {
		o.Lookup = defaultLookup
	}
	if o.Dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second}
		o.Dial = d.DialContext
	}
	g := &Gateway{o: o, egress: &http.Transport{DialContext: o.Dial, ResponseHeaderTimeout: 10 * time.Minute, MaxIdleConnsPerHost: 4}, relay: relay, cas: authorities{seed: o.Key}}
	g.proxy = &httputil.ReverseProxy{
		Rewrite:       func(*httputil.ProxyRequest) {}, // the request is rewritten before it is proxied
		Transport:     o.Transport,
		FlushInterval: -1, // model responses are streams: flush every write
		BufferPool:    bufferPool{},
		ModifyResponse: func(r *http.Response) error {
			if o.MaxResponseBytes > 0 {
				r.Body = &limitBody{ReadCloser: r.Body, left: o.MaxResponseBytes}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			status := http.StatusBadGateway
			if errors.Is(err, context.DeadlineExceeded) {
				status = http.StatusGatewayTimeout
			}
			w.WriteHeader(status)
		},
	}
	return g, nil
}

// Placeholder returns the placeholder the run's agent gets for the named
// brokered secret.
func (g *Gateway) Placeholder(run store.Run, name string) string {
	return placeholder(g.o.Key, run, name)
}

// BaseURL returns the URL through which an agent in a sandbox of the
// provider reaches upstream (a broker host) for the run.
func (g *Gateway) BaseURL(provider, runID, upstream string) (string, error) {
	base, ok := g.o.Reach[provider]
	if !ok && g.o.PublicURL != "" {
		base, ok = g.o.PublicURL, true
	}
	if !ok {
		return "", sandbox.Errorf(sandbox.FailedPrecondition, "gateway", provider, "the sandboxes of this provider cannot reach corral's egress gateway, so they cannot use brokered secrets (expose the gateway and give its URL with --gateway-public-url, or let the secret fall back: broker: {fallback: env})")
	}
	scheme, host, err := sandbox.SplitBrokerHost(upstream)
	if err != nil {
		return "", err
	}
	// ':' is written '~' (never in a host name, unreserved in URLs): git
	// matches its per-URL configuration by path, and escapes a ':' there.
	return strings.TrimSuffix(base, "/") + "/r/" + base64.RawURLEncoding.EncodeToString([]byte(runID)) + "/" + scheme + "/" + strings.ReplaceAll(host, ":", "~"), nil
}

// ServeHTTP proxies one request of an agent: a route of the reverse
// proxy, or a proxy request (CONNECT, an absolute URL) for the forward
// proxy.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect || r.URL.IsAbs() {
		g.serveForward(w, r)
		return
	}
	began := time.Now()
	cw := &countingWriter{ResponseWriter: w}
	rec := Record{Kind: "model", Method: r.Method}
	defer func() {
		rec.Status, rec.Bytes, rec.Duration = cw.status, cw.n, time.Since(began)
		if rec.Status == 0 {
			rec.Status = http.StatusOK
		}
		g.o.Logger.Info("gateway: request", "run", rec.RunID, "host", rec.Host, "status", rec.Status, "bytes", rec.Bytes,
			"duration", rec.Duration.Round(time.Millisecond), "refused", rec.Refused)
		if g.o.OnRequest != nil {
			g.o.OnRequest(rec)
		}
	}()
	refuse := func(why string) {
		rec.Refused = why
		http.Error(cw, "corral gateway: "+why, http.StatusForbidden)
	}
	runID, scheme, host, rest, ok := parseRoute(r.URL.EscapedPath())
	if !ok {
		rec.Refused = "not a gateway route"
		http.NotFound(cw, r)
		return
	}
	rec.RunID, rec.Host = runID, host
	run, found, err := g.o.Runs.GetRun(r.Context(), runID)
	if err != nil {
		rec.Refused = "store: " + sandbox.CodeOf(err).String()
		http.Error(cw, "corral gateway: the run store failed", http.StatusServiceUnavailable)
		return
	}
	if !found || run.Status.Terminal() {
		refuse("the run has ended; its placeholders are revoked")
		return
	}
	def, ok := g.o.Definition(run.DefinitionID)
	if !ok {
		refuse("the run's definition is not served here")
		return
	}
	if why := g.substitute(r.Header, run, def.Workspace.SecretsOrEmpty(), scheme, host); why == errNoPlaceholder {
		// Ask for credentials: git tries without any first, and sends
		// them (the placeholder, from its credential helper) on a 401.
		rec.Refused = why
		cw.Header().Set("WWW-Authenticate", `Basic realm="corral gateway"`)
		http.Error(cw, "corral gateway: "+why, http.StatusUnauthorized)
		return
	} else if why != "" {
		refuse(why)
		return
	}
	out := r.Clone(r.Context())
	out.URL = &url.URL{Scheme: scheme, Host: host, RawPath: rest, RawQuery: r.URL.RawQuery}
	out.URL.Path, _ = url.PathUnescape(rest)
	out.Host = host
	out.RequestURI = ""
	for _, h := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Proxy-Authorization"} {
		out.Header.Del(h)
	}
	if r.Body != nil {
		out.Body = http.MaxBytesReader(cw, r.Body, g.o.MaxRequestBytes)
	}
	if g.relayable(w, r, out) {
		g.serveRelay(cw, out)
		return
	}
	g.proxy.ServeHTTP(cw, out)
}

// substitute puts the real values in place of the run's placeholders, in
// the headers their brokers name; it returns why the request is refused,
// or "".
func (g *Gateway) substitute(h http.Header, run store.Run, secrets sandbox.Secrets, scheme, host string) string {
	used := 0
	for name, values := range h {
		for i, v := range values {
			basic := false
			view := v
			if strings.EqualFold(name, "Authorization") && len(v) > 6 && strings.EqualFold(v[:6], "basic ") {
				if dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(v[6:])); err == nil {
					view, basic = string(dec), true
				}
			}
			toks := findTokens(view)
			if len(toks) == 0 {
				continue
			}
			for _, t := range toks {
				if t.runID != run.ID {
					return "a placeholder of another run"
				}
				b, ok := secrets.Broker(t.name)
				if !ok || !hmac.Equal(t.mac, mac(g.o.Key, run, t.name)) {
					return "not a valid placeholder of this run"
				}
				if !b.AllowsHost(scheme, host) {
					return "secret " + t.name + " may not be sent to " + host
				}
				if !strings.EqualFold(b.HeaderName(), name) || basic != strings.EqualFold(b.Header, sandbox.BrokerBasic) {
					return "secret " + t.name + " may be sent only in its " + b.Header + " header"
				}
				val, _ := secrets.Value(t.name)
				view = strings.ReplaceAll(view, t.token, val)
				used++
			}
			if basic {
				view = v[:6] + base64.StdEncoding.EncodeToString([]byte(view))
			}
			values[i] = view
		}
	}
	if used == 0 {
		return errNoPlaceholder
	}
	return ""
}

// errNoPlaceholder is why a request without any placeholder is refused
// (401, asking for credentials).
const errNoPlaceholder = "no placeholder of a brokered secret in the request"

// parseRoute reads /r/<run>/<scheme>/<host>/<rest>.
func parseRoute(p string) (runID, scheme, host, rest string, ok bool) {
	p, ok = strings.CutPrefix(p, "/r/")
	if !ok {
		return "", "", "", "", false
	}
	parts := strings.SplitN(p, "/", 4)
	if len(parts) < 3 || (parts[1] != "http" && parts[1] != "https") {
		return "", "", "", "", false
	}
	id, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil || len(id) == 0 {
		return "", "", "", "", false
	}
	rest = "/"
	if len(parts) == 4 {
		rest += parts[3]
	}
	h, err := url.PathUnescape(parts[2])
	if err != nil || h == "" {
		return "", "", "", "", false
	}
	h = strings.ReplaceAll(h, "~", ":")
	return string(id), parts[1], strings.ToLower(h), rest, true
}

// countingWriter counts what reaches the agent; Unwrap lets
// http.ResponseController (the proxy's flushes) reach the real writer.
type countingWriter struct {
	http.ResponseWriter
	status int
	n      int64
}

func (c *countingWriter) WriteHeader(s int) {
	if c.status == 0 {
		c.status = s
	}
	c.ResponseWriter.WriteHeader(s)
}

func (c *countingWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	n, err := c.ResponseWriter.Write(b)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// limitBody cuts a response body past its bound.
type limitBody struct {
	io.ReadCloser
	left int64
}

func (l *limitBody) Read(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errors.New("gateway: response larger than the gateway's bound")
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.ReadCloser.Read(p)
	l.left -= int64(n)
	return n, err
}

// bufferPool lends the proxy 256 KiB copy buffers (its default is 32 KiB
// allocated per request).
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

func (bufferPool) Get() []byte  { return *buffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { buffers.Put(&b) }

func hmacEqual(a, b []byte) bool { return hmac.Equal(a, b) }
