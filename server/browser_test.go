package server_test

// The embedded web page in a real browser: headless Debian Chromium driven
// over the DevTools protocol. The page takes the daemon's token from the
// address (?token=, as corral serve prints it) and drops it from the
// address bar, starts a run from its form, shows its lines as they come,
// keeps the run across a reload (#run=<id>) with no line shown twice, and
// stops it with the Stop button.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/client"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/store"
)

const chromiumPath = "/usr/bin/chromium"

// browserPrompt prints 40 lines over about four seconds.
const browserPrompt = `for i in $(seq 1 40); do echo line$i; sleep 0.1; done`

// endlessPrompt prints a line every tenth of a second until it is
// stopped: the Stop case does not race the run's own end.
const endlessPrompt = `i=0; while :; do i=$((i+1)); echo line$i; sleep 0.1; done`

// newBrowser starts headless Chromium with a fresh profile (and extra
// options); it is stopped (and waited for) when the test ends.
func newBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) (context.Context, *pageErrors) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		testutil.Unavailable(t, "browser: "+chromiumPath+" is missing (run scripts/setup-browser.sh, which installs Debian's chromium)")
	}
	profile := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1200, 800),
	}
	opts = append(opts, extra...)
	parent, cancelParent := context.WithTimeout(context.Background(), 2*time.Minute)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(parent, opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	// Registered after TempDir: runs before it, so the browser is gone
	// before its profile is removed.
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc() // waits for the browser process to exit
		cancelParent()
	})
	errs := &pageErrors{}
	if err := chromedp.Do(ctx); err != nil { // start the browser now
		if testutil.InCI() {
			t.Fatalf("starting %s: %v", chromiumPath, err)
		}
		t.Skipf("browser: %s does not start (%v); run scripts/setup-browser.sh", chromiumPath, err)
	}
	err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			errs.add(msg)
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, fmt.Sprint(a.Value), a.Description)
				}
				errs.add("console.error: " + strings.Join(parts, " "))
			}
		}
	})
	if err != nil {
		t.Fatalf("listening to the page's events: %v", err)
	}
	return ctx, errs
}

// pageErrors collects the page's uncaught exceptions and console errors.
type pageErrors struct {
	mu   sync.Mutex
	list []string
}

func (p *pageErrors) add(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = append(p.list, s)
}

func (p *pageErrors) get() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.list...)
}

var lineRE = regexp.MustCompile(`^line(\d+)$`)

// shownLines parses the output element's text: the numbers of the lineN
// lines, in the order shown.
func shownLines(text string) []int {
	var out []int
	for _, l := range strings.Split(text, "\n") {
		if m := lineRE.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			n, _ := strconv.Atoi(m[1])
			out = append(out, n)
		}
	}
	return out
}

// checkShown fails unless the page shows line1 … lineN, each exactly once,
// in order; it returns N.
func checkShown(t *testing.T, text string) int {
	t.Helper()
	nums := shownLines(text)
	seen := map[int]int{}
	for _, n := range nums {
		seen[n]++
	}
	for n, c := range seen {
		if c > 1 {
			t.Fatalf("the page shows line%d %d times:\n%s", n, c, text)
		}
	}
	for i, n := range nums {
		if n != i+1 {
			t.Fatalf("the page shows line%d where line%d was due:\n%s", n, i+1, text)
		}
	}
	return len(nums)
}

// navigate opens url in the browser. A navigation Chromium drops with
// ERR_NETWORK_CHANGED (containers coming and going on this machine change
// its interfaces) is tried again, up to three times.
func navigate(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	var err error
	for range 3 {
		if err = chromedp.Do(ctx, chromedp.Navigate(url)); err == nil || !strings.Contains(err.Error(), "ERR_NETWORK_CHANGED") {
			break
		}
	}
	if err != nil {
		t.Fatalf("opening %s: %v", url, err)
	}
}

func waitJS(ctx context.Context, expr string, within time.Duration) error {
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(within), chromedp.WithPollingInterval(25*time.Millisecond)))
	return err
}

// pageToken is the token of the daemons the browser tests open.
const pageToken = "5ca1ab1e0ddba11c0ffee5ca1ab1e0ddba11c0ffee5ca1a"

// openWithToken opens the page at base with ?token= (as corral serve
// prints it) and checks that the page kept the token and took it out of
// the address bar.
func openWithToken(t *testing.T, ctx context.Context, pageURL, tok string) {
	t.Helper()
	navigate(t, ctx, pageURL)
	if err := waitJS(ctx, `document.readyState === 'complete'`, time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[location.href, sessionStorage.getItem('corral.token') || '', document.getElementById('token').value]`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(got[0], tok) || strings.Contains(got[0], "token=") {
		t.Fatalf("the address bar still shows the token: %s", got[0])
	}
	if got[1] != tok || got[2] != tok {
		t.Fatalf("the page kept token %q (box %q), want %q", got[1], got[2], tok)
	}
}

func TestWebPageInBrowser(t *testing.T) {
	cut := &cutter{after: 5} // cuts nothing until told to (phase 2)
	e := newEnv(t, envOptions{Defs: []string{"default", "other"}, Tokens: map[string]string{pageToken: ""},
		Wrap: func(h http.Handler) http.Handler { cut.h = h; return cut }})
	began := time.Now()
	ctx, pageErrs := newBrowser(t)
	t.Logf("browser started in %v", time.Since(began).Round(time.Millisecond))
	outText := func() string {
		t.Helper()
		text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('out').innerText`))
		if err != nil {
			t.Fatalf("reading the output: %v", err)
		}
		return text
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("evaluating %s: %v", expr, err)
		}
		return v
	}

	// Without the token the page says how to get it, and shows nothing.
	navigate(t, ctx, e.URL+"/")
	if err := waitJS(ctx, `/token/.test(document.getElementById('msg').textContent)`, time.Minute); err != nil {
		t.Fatalf("no word about the token on a page opened without it (message %q): %v", eval(`document.getElementById('msg').textContent`), err)
	}
	if n := eval(`String(document.querySelectorAll('#definition option').length)`); n != "0" {
		t.Fatalf("the page without a token lists %s definitions", n)
	}
	t.Logf("without the token the page says: %s", eval(`document.getElementById('msg').textContent`))
	openWithToken(t, ctx, e.URL+"/?token="+pageToken, pageToken)
	if err := waitJS(ctx, `document.querySelectorAll('#definition option').length === 2 && document.querySelectorAll('#harness option').length === 1`, time.Minute); err != nil {
		t.Fatalf("the form's choices did not load: %v", err)
	}
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("definition"), "default"),
		chromedp.SetValue(chromedp.ID("harness"), "command"),
		chromedp.SendKeys(chromedp.ID("prompt"), endlessPrompt),
		chromedp.Click(chromedp.ID("startbtn")),
	); err != nil {
		t.Fatal(err)
	}
	if err := waitJS(ctx, `location.hash.startsWith('#run=') && /(^|\n)line3\n/.test(document.getElementById('out').textContent)`, time.Minute); err != nil {
		t.Fatalf("no lines shown after submitting the form (message %q): %v", eval(`document.getElementById('msg').textContent`), err)
	}
	id := strings.TrimPrefix(eval(`location.hash`), "#run=")
	rec, ok, err := e.Store.GetRun(context.Background(), id)
	if err != nil || !ok || rec.Harness != "command" || rec.DefinitionID != "default" {
		t.Fatalf("the page's run %q: %+v ok=%v err=%v", id, rec, ok, err)
	}
	before := checkShown(t, outText())
	t.Logf("before the reload: %d lines", before)

	// Reload: the hash keeps the run, the view starts over and the stream
	// goes on, with no line shown twice.
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("line%d", before+3)
	if err := waitJS(ctx, fmt.Sprintf(`/(^|\n)%s\n/.test(document.getElementById('out').textContent)`, want), time.Minute); err != nil {
		t.Fatalf("after the reload the stream did not go on to %s: %v\n%s", want, err, outText())
	}
	hash, title, status := eval(`location.hash`), eval(`document.getElementById('selid').title`), eval(`document.getElementById('status').textContent`)
	if hash != "#run="+id || title != id || status != "running" {
		t.Fatalf("after the reload: hash %q title %q status %q, want run %s running", hash, title, status, id)
	}
	after := checkShown(t, outText())
	t.Logf("after the reload: %d lines", after)

	// Stop.
	stopAt := time.Now()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("stop"))); err != nil {
		t.Fatal(err)
	}
	if err := waitJS(ctx, `document.getElementById('status').textContent === 'cancelled'`, time.Minute); err != nil {
		t.Fatalf("status %q (message %q) after Stop, want cancelled: %v", eval(`document.getElementById('status').textContent`),
			eval(`document.getElementById('msg').textContent`), err)
	}
	stoppedIn := time.Since(stopAt)
	e.waitStatus(id, store.RunCancelled, time.Minute)
	final := checkShown(t, outText())
	if disabled, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('stop').disabled`)); err != nil || !disabled {
		t.Errorf("the Stop button is still enabled on a cancelled run (%v)", err)
	}
	// The run list shows it cancelled.
	if row := eval(`(document.querySelector('#runs tr.sel') || {}).textContent || ''`); !strings.Contains(row, "cancelled") {
		t.Errorf("the selected run's row reads %q, want cancelled", row)
	}
	t.Logf("stopped after %d lines; the page showed cancelled %v after the click", final, stoppedIn.Round(time.Millisecond))

	// A dropped stream: the server cuts the page's event stream after five
	// events; the page reconnects by itself with Last-Event-ID, and shows
	// every line once, to the end.
	id2 := e.startJSON(pageToken, jsonBody(t, api.StartRun{Prompt: browserPrompt}))
	cut.mu.Lock()
	cut.left, cut.served = 1, 0
	cut.mu.Unlock()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash = "#run=`+id2+`"`)); err != nil {
		t.Fatal(err)
	}
	if err := waitJS(ctx, `document.getElementById('status').textContent === 'completed'`, time.Minute); err != nil {
		t.Fatalf("the second run is %q on the page, want completed: %v\n%s", eval(`document.getElementById('status').textContent`), err, outText())
	}
	if msg := eval(`document.getElementById('msg').textContent`); strings.Contains(msg, "cancel") {
		t.Errorf("opening another run keeps the first run's message %q", msg)
	}
	if n := checkShown(t, outText()); n != 40 {
		t.Fatalf("the page shows %d lines of the second run, want 40", n)
	}
	cut.mu.Lock()
	cuts, served := cut.cuts, cut.served
	cut.mu.Unlock()
	if cuts != 1 || served < 2 {
		t.Fatalf("%d streams cut, %d served: the page did not reconnect", cuts, served)
	}
	if p := os.Getenv("CORRAL_BROWSER_SCREENSHOT"); p != "" {
		if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
			_ = os.WriteFile(p, png, 0o644)
		}
	}
	if errs := pageErrs.get(); len(errs) > 0 {
		t.Errorf("the page reported errors: %q", errs)
	}
}

// TestServeInBrowser: `corral serve` started as the README says (no
// token given) prints its page's address with a token it made; the page
// opened at that address drops the token from the address bar, lists the
// runs, starts one and shows it to the end.
func TestServeInBrowser(t *testing.T) {
	bin := buildCorral(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "corral.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("provider:\n  name: local\n  local: {baseDir: %s}\n", filepath.Join(dir, "sandboxes"))), 0o644); err != nil {
		t.Fatal(err)
	}
	stateDir := t.TempDir()
	d := startDaemon(t, bin, "serve", "sqlite:"+filepath.Join(dir, "corral.db"), cfg, stateDir)
	if d.PageURL != d.URL+"/?token="+d.Token {
		t.Fatalf("printed page address %q", d.PageURL)
	}
	kept, err := api.ReadToken(filepath.Join(stateDir, "corral", api.TokenFileName))
	if err != nil || kept != d.Token {
		t.Fatalf("the state directory keeps %q (%v), the daemon printed %q", kept, err, d.Token)
	}
	// A run started before the page opens is in its list.
	c, err := client.New(d.URL, d.Token)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, time.Minute)
	first, err := c.Start(ctx, api.StartRun{Prompt: "echo before"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Events(ctx, first.ID, 0, func(store.Event) error { return nil }); err != nil {
		t.Fatal(err)
	}

	bctx, pageErrs := newBrowser(t)
	openWithToken(t, bctx, d.PageURL, d.Token)
	if err := waitJS(bctx, `document.querySelectorAll('#harness option').length > 0 && /`+first.ID[len(first.ID)-12:]+`/.test(document.getElementById('runs').textContent)`, time.Minute); err != nil {
		t.Fatalf("the page opened at the printed address does not list run %s: %v", first.ID, err)
	}
	if err := chromedp.Do(bctx,
		chromedp.SetValue(chromedp.ID("harness"), "command"),
		chromedp.SendKeys(chromedp.ID("prompt"), `for i in 1 2 3; do echo line$i; done`),
		chromedp.Click(chromedp.ID("startbtn")),
	); err != nil {
		t.Fatal(err)
	}
	if err := waitJS(bctx, `document.getElementById('status').textContent === 'completed' && /(^|\n)line3\n/.test(document.getElementById('out').textContent)`, time.Minute); err != nil {
		msg, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.getElementById('msg').textContent`))
		t.Fatalf("the page did not show its run to the end (message %q): %v", msg, err)
	}
	id, err := chromedp.Run(bctx, chromedp.Evaluate[string](`location.hash.slice(5)`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Run(ctx, id)
	if err != nil || r.Status != "completed" {
		t.Fatalf("the page's run %s: %+v %v", id, r, err)
	}
	href, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`location.href`))
	t.Logf("corral serve printed %s/?token=<%d hex digits>; the page at it listed run %s and ran %s to the end; its address is now %s", d.URL, len(d.Token), first.ID, id, href)
	if errs := pageErrs.get(); len(errs) > 0 {
		t.Errorf("the page reported errors: %q", errs)
	}
}
