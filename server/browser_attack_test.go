package server_test

// Pages on other origins attack a daemon in a real browser: Chromium
// opens an attacker's page (on another site, evil.test, and on another port
// of 127.0.0.1, which is the same site), and the page sends what a page
// can — no-cors fetches with text/plain and typeless bodies, a CORS JSON
// fetch, a beacon, three HTML forms (text/plain, urlencoded, multipart) —
// each a run that would touch a file on the host. The daemon runs with
// NoAuth, as the old default did, so only the Host, origin and
// content-type rules stand in the way. Then a DNS-rebinding page: the
// browser reaches the daemon under the attacker's name.

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// seen is a request the daemon received, and its answer.
type seen struct {
	Method, Path, Origin, Site, Type string
	Status                           int
}

// recorder wraps the daemon's handler and records every request.
type recorder struct {
	h    http.Handler
	mu   sync.Mutex
	reqs []seen
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w}
	rc.h.ServeHTTP(sw, r)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.reqs = append(rc.reqs, seen{r.Method, r.URL.Path, r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Content-Type"), sw.status})
}

func (rc *recorder) take() []seen {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := rc.reqs
	rc.reqs = nil
	return out
}

func (rc *recorder) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.reqs)
}

// attackPage is the attacker's page against the daemon at daemon; marker
// names the files its runs would touch.
func attackPage(daemon string, marker func(string) string) string {
	js := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	body := func(name string) string { return js(map[string]string{"prompt": "touch " + marker(name)}) }
	formText := strings.TrimSuffix(body("form-plain"), "}") + `,"x":"`
	return `<!doctype html><html><body>
<iframe name="f1"></iframe><iframe name="f2"></iframe><iframe name="f3"></iframe>
<form id="plain" method="POST" action="` + daemon + `/v1/runs" enctype="text/plain" target="f1"><input name="` + html.EscapeString(formText) + `" value='"}'></form>
<form id="url" method="POST" action="` + daemon + `/v1/runs" target="f2"><input name="prompt" value="` + html.EscapeString("touch "+marker("form-url")) + `"></form>
<form id="multi" method="POST" action="` + daemon + `/v1/runs" enctype="multipart/form-data" target="f3"><input name="prompt" value="` + html.EscapeString("touch "+marker("form-multi")) + `"></form>
<script>
"use strict";
const d = ` + js(daemon) + `;
window.results = {};
async function attempt(name, p) {
  try { const r = await p; results[name] = r.type + " " + r.status + " " + (r.type === "opaque" ? "" : await r.text()); }
  catch (e) { results[name] = "failed: " + e.message; }
}
(async () => {
  await Promise.all([
    attempt("no-cors text/plain", fetch(d + "/v1/runs", { method: "POST", mode: "no-cors", headers: { "Content-Type": "text/plain" }, body: ` + js(body("no-cors")) + ` })),
    attempt("no-cors blob", fetch(d + "/v1/runs", { method: "POST", mode: "no-cors", body: new Blob([` + js(body("blob")) + `]) })),
    attempt("cors JSON", fetch(d + "/v1/runs", { method: "POST", headers: { "Content-Type": "application/json" }, body: ` + js(body("cors")) + ` })),
    attempt("read the runs", fetch(d + "/v1/runs")),
    attempt("no-cors runs", fetch(d + "/v1/runs", { mode: "no-cors" })),
  ]);
  results["beacon"] = String(navigator.sendBeacon(d + "/v1/runs", new Blob([` + js(body("beacon")) + `], { type: "text/plain" })));
  for (const id of ["plain", "url", "multi"]) document.getElementById(id).submit();
  window.fired = true;
})();
</script></body></html>`
}

// attackerRequests is what the daemon sees from one attack page: five
// POSTs of data (no-cors ×2, beacon, forms ×3 — 6), the CORS preflight
// (its POST is never sent), two GETs.
const attackerRequests = 9

func TestCrossSitePageInBrowser(t *testing.T) {
	rec := &recorder{}
	e := newEnv(t, envOptions{Wrap: func(h http.Handler) http.Handler { rec.h = h; return rec }})
	dir := t.TempDir()
	marker := func(phase string) func(string) string {
		return func(name string) string { return filepath.Join(dir, phase+"-"+name) }
	}
	var page struct {
		mu   sync.Mutex
		html string
	}
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page.mu.Lock()
		defer page.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page.html)
	}))
	t.Cleanup(evil.Close)
	_, evilPort, _ := strings.Cut(strings.TrimPrefix(evil.URL, "http://"), ":")
	_, daemonPort, _ := strings.Cut(strings.TrimPrefix(e.URL, "http://"), ":")
	// evil.test and attacker.test are names of the attacker's that resolve
	// to this machine (the DNS-rebinding case).
	ctx, _ := newBrowser(t, chromedp.Flag("host-resolver-rules", "MAP evil.test 127.0.0.1, MAP attacker.test 127.0.0.1"))

	sent, refused := 0, 0
	for _, ph := range []struct{ name, pageURL string }{
		{"cross-site", "http://evil.test:" + evilPort + "/"},
		{"same-site", "http://127.0.0.1:" + evilPort + "/"},
	} {
		page.mu.Lock()
		page.html = attackPage(e.URL, marker(ph.name))
		page.mu.Unlock()
		navigate(t, ctx, ph.pageURL)
		if err := waitJS(ctx, `window.fired === true`, time.Minute); err != nil {
			t.Fatalf("%s: the attack page did not run: %v", ph.name, err)
		}
		// Forms and beacons go out after fired; wait (bounded) for all of
		// them to reach the daemon.
		deadline := time.Now().Add(20 * time.Second)
		for rec.count() < attackerRequests && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		got := rec.take()
		if len(got) < attackerRequests {
			t.Fatalf("%s: the daemon saw %d requests of the page's %d: %+v", ph.name, len(got), attackerRequests, got)
		}
		for _, r := range got {
			sent++
			if r.Status < 400 {
				t.Errorf("%s: %s %s (Origin %q, Sec-Fetch-Site %q, %q) answered %d", ph.name, r.Method, r.Path, r.Origin, r.Site, r.Type, r.Status)
				continue
			}
			refused++
		}
		results, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]string](`window.results`))
		if err != nil {
			t.Fatal(err)
		}
		for name, res := range results {
			if strings.Contains(res, `"runs"`) || strings.Contains(res, "run-") {
				t.Errorf("%s: the attack page read the daemon's answer to %s: %s", ph.name, name, res)
			}
		}
		t.Logf("%s page (%s): the daemon saw %d requests, statuses %v; the page saw %v", ph.name, ph.pageURL, len(got), statuses(got), results)
	}

	// DNS rebinding: attacker.test now resolves to 127.0.0.1, so the
	// browser sends the daemon requests under the attacker's name (and its
	// origin's pages may read the answers). The daemon does not answer.
	for _, path := range []string{"/", "/v1/runs", "/metrics", "/v1/definitions"} {
		navigate(t, ctx, "http://attacker.test:"+daemonPort+path)
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ''`))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rec.take() {
			sent++
			if r.Status != http.StatusForbidden {
				t.Errorf("rebinding: %s %s answered %d: %s", r.Method, r.Path, r.Status, text)
				continue
			}
			refused++
		}
		if !strings.Contains(text, "does not name this daemon") {
			t.Errorf("rebinding: GET %s under attacker.test shows %q", path, text)
		}
	}

	if n := e.runCount(); n != 0 {
		t.Fatalf("the attack pages started %d runs", n)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the attack pages touched %v", left)
	}
	t.Logf("cross-site requests refused: %d of %d sent (real browser, NoAuth daemon); runs started: 0; files touched: 0", refused, sent)
	if refused != sent {
		t.Fatalf("%d of %d requests got through", sent-refused, sent)
	}
}

func statuses(rs []seen) map[string]int {
	out := map[string]int{}
	for _, r := range rs {
		out[fmt.Sprintf("%s %d", r.Method, r.Status)]++
	}
	return out
}
