package server_test

// Attacks a web page can make on a daemon on loopback: no-cors fetches
// with text/plain bodies, HTML forms, cross-origin JSON, DNS rebinding
// (its own name in Host). Each would run `touch` on the host through a
// tokenless daemon if it got through; none may, even with NoAuth, and the
// daemon's own page, curl and the Go client still work.

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/client"
	"github.com/d10ffeed/corral/server"
	"github.com/d10ffeed/corral/store"
)

// attack is one request a hostile page could make the browser send.
type attack struct {
	name   string
	req    request
	status int
}

// touchBody is a run request whose command would create marker.
func touchBody(t *testing.T, marker string) string {
	return jsonBody(t, api.StartRun{Prompt: "touch " + marker})
}

// attacks are the requests of a page on evil.example (or on another port
// of 127.0.0.1) against the daemon at base; every one carries a command
// that touches a file under dir.
func attacks(t *testing.T, base, dir string) []attack {
	t.Helper()
	u, _ := url.Parse(base)
	_, port, _ := strings.Cut(u.Host, ":")
	marker := func(name string) string { return filepath.Join(dir, strings.ReplaceAll(name, " ", "-")) }
	noCors := func(origin, site string) map[string]string {
		return map[string]string{"Content-Type": "text/plain;charset=UTF-8", "Origin": origin, "Sec-Fetch-Site": site, "Sec-Fetch-Mode": "no-cors"}
	}
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	_ = mw.WriteField("prompt", "touch "+marker("multipart"))
	_ = mw.Close()
	formText := touchBody(t, marker("form text")) // <form enctype=text/plain> can send JSON-looking text
	formText = formText[:len(formText)-1] + `,"x":"="}`
	var out []attack
	add := func(name string, status int, r request) { out = append(out, attack{name, r, status}) }
	add("no-cors fetch, text/plain", 403, request{Method: "POST", Path: "/v1/runs", Body: touchBody(t, marker("no-cors")), Header: noCors("http://evil.example", "cross-site")})
	add("no-cors fetch, text/plain, same-site page", 403, request{Method: "POST", Path: "/v1/runs", Body: touchBody(t, marker("same-site")), Header: noCors("http://127.0.0.1:9", "same-site")})
	add("text/plain from the daemon's own origin", 415, request{Method: "POST", Path: "/v1/runs", Body: touchBody(t, marker("own")), Header: map[string]string{"Content-Type": "text/plain", "Origin": base, "Sec-Fetch-Site": "same-origin"}})
	add("text/plain, no browser headers", 415, request{Method: "POST", Path: "/v1/runs", Body: touchBody(t, marker("plain")), Header: map[string]string{"Content-Type": "text/plain"}})
	add("form, enctype text/plain", 403, request{Method: "POST", Path: "/v1/runs", Body: formText, Header: map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}})
	add("form, urlencoded", 403, request{Method: "POST", Path: "/v1/runs", Body: url.Values{"prompt": {"touch " + marker("urlencoded")}}.Encode(),
		Header: map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}})
	add("form, urlencoded, no Origin", 415, request{Method: "POST", Path: "/v1/runs", Body: url.Values{"prompt": {"touch " + marker("urlencoded2")}}.Encode(),
		Header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
	add("form, multipart", 403, request{Method: "POST", Path: "/v1/runs", Body: mp.String(),
		Header: map[string]string{"Content-Type": mw.FormDataContentType(), "Origin": "null", "Sec-Fetch-Site": "cross-site"}})
	add("no Content-Type", 415, request{Method: "POST", Path: "/v1/runs", Body: touchBody(t, marker("no-type")), Header: map[string]string{"Content-Type": ""}})
	add("JSON, Origin evil.example", 403, request{Method: "POST", Path: "/v1/runs", Body: touchBody(t, marker("cors")), Header: map[string]string{"Origin": "http://evil.example"}})
	add("JSON, Origin another port", 403, request{Method: "POST", Path: "/v1/runs", Body: touchBody(t, marker("port")), Header: map[string]string{"Origin": "http://127.0.0.1:9"}})
	add("JSON, Origin null", 403, request{Method: "POST", Path: "/v1/runs", Body: touchBody(t, marker("null")), Header: map[string]string{"Origin": "null"}})
	add("JSON, Origin evil.example on the daemon's port", 403, request{Method: "POST", Path: "/v1/runs", Body: touchBody(t, marker("https")), Header: map[string]string{"Origin": "https://evil.example:" + port}})
	add("JSON, Sec-Fetch-Site cross-site", 403, request{Method: "POST", Path: "/v1/runs", Body: touchBody(t, marker("sfs")), Header: map[string]string{"Sec-Fetch-Site": "cross-site"}})
	add("JSON, Sec-Fetch-Site same-site", 403, request{Method: "POST", Path: "/v1/runs", Body: touchBody(t, marker("sfs2")), Header: map[string]string{"Sec-Fetch-Site": "same-site"}})
	add("JSON, DNS rebinding", 403, request{Method: "POST", Path: "/v1/runs", Body: touchBody(t, marker("rebind")),
		Header: map[string]string{"Host": "attacker.example:" + port, "Origin": "http://attacker.example:" + port, "Sec-Fetch-Site": "same-origin"}})
	add("JSON, DNS rebinding, no port", 403, request{Method: "POST", Path: "/v1/runs", Body: touchBody(t, marker("rebind2")), Header: map[string]string{"Host": "attacker.example"}})
	add("cancel, text/plain", 403, request{Method: "POST", Path: "/v1/runs/run-x/cancel", Header: noCors("http://evil.example", "cross-site")})
	add("cancel, no Content-Type", 415, request{Method: "POST", Path: "/v1/runs/run-x/cancel", Header: map[string]string{"Content-Type": ""}})
	add("delete sandbox, form", 415, request{Method: "DELETE", Path: "/v1/sandboxes/x", Header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
	add("PUT, text/plain", 415, request{Method: "PUT", Path: "/v1/runs", Body: "x", Header: map[string]string{"Content-Type": "text/plain"}})
	// Reads: a rebound name reads nothing, not even the page or metrics;
	// another site's requests (images, scripts, no-cors) are refused.
	for _, path := range []string{"/v1/runs", "/", "/metrics", "/healthz", "/v1/definitions", "/v1/sandboxes", "/v1/runs/x/events"} {
		add("GET "+path+", DNS rebinding", 403, request{Method: "GET", Path: path, Header: map[string]string{"Host": "attacker.example:" + port}})
	}
	add("GET /v1/runs, Host 0.0.0.0", 403, request{Method: "GET", Path: "/v1/runs", Header: map[string]string{"Host": "0.0.0.0:" + port}})
	add("GET /v1/runs, Origin evil.example", 403, request{Method: "GET", Path: "/v1/runs", Header: map[string]string{"Origin": "http://evil.example"}})
	add("GET events, img from another site", 403, request{Method: "GET", Path: "/v1/runs/x/events", Header: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}})
	add("GET /, framed by another site", 403, request{Method: "GET", Path: "/", Header: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "iframe"}})
	add("OPTIONS preflight from evil.example", 403, request{Method: "OPTIONS", Path: "/v1/runs", Header: map[string]string{"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}})
	return out
}

func TestCrossSiteRequestsRefused(t *testing.T) {
	for _, auth := range []string{"NoAuth", "token"} {
		t.Run(auth, func(t *testing.T) {
			o := envOptions{}
			tok := ""
			if auth == "token" {
				tok = "the-token"
				o.Tokens = map[string]string{tok: ""}
			}
			e := newEnv(t, o)
			dir := t.TempDir()
			list := attacks(t, e.URL, dir)
			refused := 0
			for _, a := range list {
				a.req.Token = tok // the attacker does not have it, but even so
				resp, body := do(t, e.URL, a.req)
				if resp.StatusCode != a.status {
					t.Errorf("%s: %s %s, want %d", a.name, resp.Status, body, a.status)
					continue
				}
				apiError(t, resp, body)
				if strings.Contains(resp.Header.Get("Access-Control-Allow-Origin"), "evil") {
					t.Errorf("%s: the answer allows %s", a.name, resp.Header.Get("Access-Control-Allow-Origin"))
				}
				refused++
			}
			if n := e.runCount(); n != 0 {
				t.Fatalf("the attacks started %d runs", n)
			}
			// The control: the same command from curl (JSON, no Origin)
			// runs, so the markers' absence means something.
			id := e.startJSON(tok, touchBody(t, filepath.Join(dir, "control")))
			e.waitStatus(id, store.RunCompleted, time.Minute)
			if _, err := os.Stat(filepath.Join(dir, "control")); err != nil {
				t.Fatalf("the control run did not touch its file: %v", err)
			}
			left, _ := os.ReadDir(dir)
			if len(left) != 1 {
				t.Fatalf("files under the attack directory: %v, want the control only", left)
			}
			mt := scrapeLocal(t, e, tok)
			t.Logf("cross-site requests refused: %d of %d sent (%s); runs started by them: 0; files they touched: 0; %s", refused, len(list), auth, mt)
		})
	}
}

// scrapeLocal returns the daemon's corral_requests_refused_total samples.
func scrapeLocal(t *testing.T, e *env, tok string) string {
	t.Helper()
	_, body := do(t, e.URL, request{Method: "GET", Path: "/metrics", Token: tok})
	var out []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "corral_requests_refused_total{") {
			out = append(out, l)
		}
	}
	return strings.Join(out, ", ")
}

// The daemon's own page, tools without browser headers, and configured
// names and origins get through.
func TestSameOriginRequestsPass(t *testing.T) {
	e := newEnv(t, envOptions{Hosts: []string{"corral.internal", "other.internal:8443"}, Origins: []string{"https://ops.example/"}})
	u, _ := url.Parse(e.URL)
	_, port, _ := strings.Cut(u.Host, ":")
	body := jsonBody(t, api.StartRun{Prompt: "true"})
	for _, c := range []struct {
		name string
		hdr  map[string]string
	}{
		{"curl", nil},
		{"the page (same-origin)", map[string]string{"Origin": e.URL, "Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}},
		{"the page via localhost", map[string]string{"Host": "localhost:" + port, "Origin": "http://localhost:" + port, "Sec-Fetch-Site": "same-origin"}},
		{"the page via [::1]", map[string]string{"Host": "[::1]:" + port, "Origin": "http://[::1]:" + port}},
		{"an SSH tunnel on another port", map[string]string{"Host": "localhost:18080", "Origin": "http://localhost:18080"}},
		{"typed into the address bar", map[string]string{"Sec-Fetch-Site": "none"}},
		{"JSON with a charset", map[string]string{"Content-Type": "application/json; charset=utf-8"}},
		{"an allowed host, any port", map[string]string{"Host": "corral.internal:" + port, "Origin": "http://corral.internal:" + port}},
		{"an allowed host, no port", map[string]string{"Host": "CORRAL.internal"}},
		{"an allowed host:port", map[string]string{"Host": "other.internal:8443"}},
		{"an allowed origin", map[string]string{"Origin": "https://ops.example", "Sec-Fetch-Site": "cross-site"}},
	} {
		resp, b := do(t, e.URL, request{Method: "POST", Path: "/v1/runs", Body: body, Header: c.hdr})
		if resp.StatusCode != http.StatusCreated {
			t.Errorf("%s: %s %s, want 201", c.name, resp.Status, b)
		}
	}
	for _, c := range []struct{ name, host string }{
		{"an allowed host on another port", "other.internal:9"},
		{"a suffix of an allowed host", "evil-corral.internal"},
		{"a subdomain of localhost", "evil.localhost:" + port},
	} {
		resp, b := do(t, e.URL, request{Method: "GET", Path: "/v1/runs", Header: map[string]string{"Host": c.host}})
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s (%s): %s %s, want 403", c.name, c.host, resp.Status, b)
		}
	}
	// The Go client sends JSON on every write, bodies or not.
	c := e.client("")
	ctx := testCtx(t, time.Minute)
	r, err := c.Start(ctx, api.StartRun{Prompt: "sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, r.ID); err != nil {
		t.Fatalf("client.Cancel: %v", err)
	}
	e.waitStatus(r.ID, store.RunCancelled, time.Minute)
	sbs, err := c.Sandboxes(ctx)
	if err != nil || len(sbs) == 0 {
		t.Fatalf("sandboxes: %v %v", sbs, err)
	}
	if err := c.DeleteSandbox(ctx, sbs[0].Key); err != nil {
		t.Fatalf("client.DeleteSandbox: %v", err)
	}
}

func TestTokenRequired(t *testing.T) {
	const tok = "0123456789abcdef0123456789abcdef0123456789abcdef"
	e := newEnv(t, envOptions{Tokens: map[string]string{tok: ""}})
	body := jsonBody(t, api.StartRun{Prompt: "true"})
	sent, refused := 0, 0
	for _, c := range []struct {
		name string
		req  request
	}{
		{"no token", request{Method: "POST", Path: "/v1/runs", Body: body}},
		{"wrong token", request{Method: "POST", Path: "/v1/runs", Body: body, Token: "ffff" + tok[4:]}},
		{"a prefix of the token", request{Method: "POST", Path: "/v1/runs", Body: body, Token: tok[:47]}},
		{"the token and more", request{Method: "POST", Path: "/v1/runs", Body: body, Token: tok + "0"}},
		{"wrong access_token", request{Method: "GET", Path: "/v1/runs?access_token=nope"}},
		{"no token, list", request{Method: "GET", Path: "/v1/runs"}},
		{"no token, metrics", request{Method: "GET", Path: "/metrics"}},
		{"wrong token, metrics", request{Method: "GET", Path: "/metrics", Token: "nope"}},
	} {
		sent++
		resp, b := do(t, e.URL, c.req)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %s %s, want 401", c.name, resp.Status, b)
			continue
		}
		apiError(t, resp, b)
		refused++
	}
	if n := e.runCount(); n != 0 {
		t.Fatalf("requests without the token started %d runs", n)
	}
	t.Logf("requests without the right token refused: %d of %d sent", refused, sent)
	e.startJSON(tok, body)
	if resp, _ := do(t, e.URL, request{Method: "GET", Path: "/metrics", Token: tok}); resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics with the token: %s", resp.Status)
	}
	if _, err := e.client(tok).Runs(testCtx(t, time.Minute), client.ListOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestNewNeedsTokensOrNoAuth(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, o := range []struct {
		name   string
		tokens map[string]string
		noAuth bool
	}{
		{"neither", nil, false},
		{"both", map[string]string{"t": ""}, true},
		{"an empty token", map[string]string{"": "acme"}, false},
	} {
		if _, err := newServer(e, o.tokens, o.noAuth); err == nil {
			t.Errorf("server.New with %s: no error", o.name)
		} else {
			t.Logf("%s: %v", o.name, err)
		}
	}
	if _, err := newServer(e, nil, true); err != nil {
		t.Fatal(fmt.Errorf("NoAuth alone: %w", err))
	}
}

// newServer makes another server over the env's runner.
func newServer(e *env, tokens map[string]string, noAuth bool) (*server.Server, error) {
	return server.New(server.Options{Runner: e.Runner, Definitions: []string{"default"}, Harnesses: []string{"command"}, Tokens: tokens, NoAuth: noAuth})
}
