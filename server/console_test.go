package server_test

// The console (the embedded page) in a real browser, view by view: the run
// list and its filters, a thread shown as one conversation (prompts, text,
// reasoning collapsed, a tool call with its arguments and result, a diff
// per file), a failed run's stderr, approvals answered by a button (live,
// and in the thread's next run), a thread's checkpoints (save, restore,
// fork), the sandboxes with Destroy, and the
// layout at 1280 px and at phone width.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// scripted is a test harness: it runs the prompt as a shell script, like
// command, and its translator turns marked lines into the events an agent
// harness makes:
//
//	@think TEXT            a reasoning span
//	@tool ID NAME JSON     a tool call with its arguments
//	@result ID TEXT        the tool call's result
//	@wait ID               an approval request the live turn waits for
type scripted struct{}

func (scripted) Name() string { return "scripted" }

func (scripted) Prepare(ctx context.Context, h sandbox.Handle, req harness.Request) (harness.Invocation, error) {
	return command.Harness{}.Prepare(ctx, h, req)
}

func (scripted) Translator(run harness.Run) harness.Translator {
	return &scriptTranslator{Translator: command.Harness{}.Translator(run), ids: event.IDs{RunID: run.RunID}}
}

type scriptTranslator struct {
	harness.Translator
	ids event.IDs
}

func (t *scriptTranslator) Line(line []byte) []event.Event {
	cmd, rest, _ := strings.Cut(string(line), " ")
	switch cmd {
	case "@think":
		id := t.ids.Next("think")
		evs := event.OpenReasoning(id)
		evs = append(evs, event.Event{Type: event.ReasoningContent, MessageID: id, Delta: rest})
		return append(evs, event.CloseReasoning(id)...)
	case "@tool":
		f := strings.SplitN(rest, " ", 3)
		return []event.Event{{Type: event.ToolCallStart, ToolCallID: f[0], ToolCallName: f[1]},
			{Type: event.ToolCallArgs, ToolCallID: f[0], Delta: f[2]}, {Type: event.ToolCallEnd, ToolCallID: f[0]}}
	case "@result":
		id, text, _ := strings.Cut(rest, " ")
		return []event.Event{{Type: event.ToolCallResult, ToolCallID: id, MessageID: t.ids.Next("result"), Content: text}}
	case "@wait":
		return []event.Event{event.CustomEvent(event.ApprovalRequested, event.Approval{ID: rest, Kind: "command", Target: "rm -rf build"}),
			event.CustomEvent("approval.waiting", map[string]any{"approvalId": rest, "wait": "5m"})}
	}
	return t.Translator.Line(line)
}

// liveAnswers stands in for POST /v1/runs/{id}/approvals (another branch
// brings it): answers to the ids in take are recorded and accepted (202),
// the rest go on to the daemon.
type liveAnswers struct {
	h    http.Handler
	take map[string]bool
	mu   sync.Mutex
	got  []liveAnswer
}

func (l *liveAnswers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/approvals") {
		body, _ := io.ReadAll(r.Body)
		var a liveAnswer
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err == nil && l.take[a.ApprovalID] && r.Header.Get("Authorization") == "Bearer "+pageToken {
			l.mu.Lock()
			l.got = append(l.got, a)
			l.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write(body)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	l.h.ServeHTTP(w, r)
}

func (l *liveAnswers) answers() []liveAnswer {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]liveAnswer(nil), l.got...)
}

// page is a browser tab on the console with helpers that fail the test.
type page struct {
	t   *testing.T
	ctx context.Context
}

func (p page) eval(expr string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		p.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

func (p page) num(expr string) int {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[int](expr))
	if err != nil {
		p.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

func (p page) wait(expr, what string) {
	p.t.Helper()
	if err := waitJS(p.ctx, expr, time.Minute); err != nil {
		p.t.Fatalf("%s: %v (message %q)\n%s", what, err, p.eval(`document.getElementById('msg').textContent`), p.eval(`document.getElementById('out').innerText`))
	}
}

func (p page) do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatal(err)
	}
}

func (p page) hash(h string) { p.t.Helper(); p.eval(`location.hash = ` + jsString(h)) }

func jsString(s string) string { b, _ := json.Marshal(s); return string(b) }

// The first run of a thread makes its workspace a git repository, so the
// runs after it report their changes (file.changed); it also thinks and
// calls a tool.
const convFirst = `git init -q . && git -c user.email=t@t -c user.name=t commit -q --allow-empty -m init
echo '@think I should look at the workspace first'
echo '@tool call-1 bash {"command":"ls -a"}'
echo '@result call-1 .  ..  .git'
echo 'the workspace is empty'`

// convSecond edits two files.
const convSecond = `printf 'hello\nworld\n' > notes.txt; echo 'x = 1' > b.txt; echo 'wrote two files'`

func TestConsoleInBrowser(t *testing.T) {
	live := &liveAnswers{take: map[string]bool{"live-1": true}}
	e := newEnv(t, envOptions{Extra: []harness.Harness{scripted{}, asker{}}, Tokens: map[string]string{pageToken: ""},
		Wrap: func(h http.Handler) http.Handler { live.h = h; return live }})
	ctx, pageErrs := newBrowser(t, chromedp.WindowSize(1280, 800))
	p := page{t, ctx}
	okID := e.startJSON(pageToken, jsonBody(t, api.StartRun{Prompt: "echo fine"}))
	badID := e.startJSON(pageToken, jsonBody(t, api.StartRun{Prompt: "echo oops on stderr >&2; exit 3"}))
	e.waitStatus(okID, store.RunCompleted, time.Minute)
	e.waitStatus(badID, store.RunFailed, time.Minute)
	okRec, _, _ := e.Store.GetRun(context.Background(), okID)

	openWithToken(t, ctx, e.URL+"/?token="+pageToken, pageToken)
	if h := p.eval(`document.getElementById('harness').value`); h != "command" {
		p.wait(`document.getElementById('harness').value === 'command'`, "the harness picker defaults to "+h)
	}

	t.Run("run list and filters", func(t *testing.T) {
		p := page{t, ctx}
		p.wait(`document.querySelectorAll('#runs tr').length === 2`, "the run list does not show the two runs")
		row := func(id string) string {
			return p.eval(`(document.querySelector('#runs tr[data-run="` + id + `"]') || {}).innerText || ''`)
		}
		bad, ok := row(badID), row(okID)
		for _, want := range []string{"failed", "command", "local", "3"} {
			if !strings.Contains(bad, want) {
				t.Errorf("the failed run's row %q lacks %q", bad, want)
			}
		}
		if !strings.Contains(ok, "completed") || !strings.Contains(ok, "local") || !strings.Contains(ok, "ms") && !strings.Contains(ok, "s") {
			t.Errorf("the completed run's row %q lacks status, provider or duration", ok)
		}
		t.Logf("rows: %q | %q", strings.ReplaceAll(bad, "\t", " "), strings.ReplaceAll(ok, "\t", " "))
		p.do(chromedp.SetValue(chromedp.ID("fstatus"), "failed"))
		p.eval(`document.getElementById('fstatus').dispatchEvent(new Event('input')), ''`)
		p.wait(`document.querySelectorAll('#runs tr').length === 1 && !!document.querySelector('#runs tr[data-run="`+badID+`"]')`, "the status filter does not keep the failed run only")
		p.do(chromedp.Click(chromedp.ID("fclear")))
		p.do(chromedp.SendKeys(chromedp.ID("fthread"), okRec.ThreadID))
		p.wait(`document.querySelectorAll('#runs tr').length === 1 && !!document.querySelector('#runs tr[data-run="`+okID+`"]')`, "the thread filter does not keep the thread's run only")
		p.do(chromedp.Click(chromedp.ID("fclear")))
		p.wait(`document.querySelectorAll('#runs tr').length === 2`, "clearing the filters does not show every run")
		t.Logf("status=failed: 1 of 2 rows; thread=%s: 1 of 2 rows", okRec.ThreadID)
	})

	t.Run("stderr", func(t *testing.T) {
		p := page{t, ctx}
		p.hash("#run=" + badID)
		p.wait(`/oops on stderr/.test((document.querySelector('section.turn[data-run="`+badID+`"] .stderr') || {}).innerText || '')`, "the failed run's stderr is not shown")
		t.Logf("stderr box: %q", p.eval(`document.querySelector('.stderr').innerText`))
	})

	var convThread string
	t.Run("thread conversation", func(t *testing.T) {
		p := page{t, ctx}
		p.hash("#")
		p.do(chromedp.SetValue(chromedp.ID("harness"), "scripted"), chromedp.SetValue(chromedp.ID("prompt"), convFirst), chromedp.Click(chromedp.ID("startbtn")))
		p.wait(`/the workspace is empty/.test(document.getElementById('out').innerText) && document.getElementById('status').textContent === 'completed'`, "the first turn did not finish")
		first := strings.TrimPrefix(p.eval(`decodeURIComponent(location.hash)`), "#run=")
		p.do(chromedp.SendKeys(chromedp.ID("replyprompt"), convSecond), chromedp.Click(chromedp.ID("replybtn")))
		p.wait(`document.querySelectorAll('#out section.turn').length === 2 && !!document.querySelector('#out .diff details.file[data-file="notes.txt"]')`, "the second turn shows no diff")
		second := strings.TrimPrefix(p.eval(`decodeURIComponent(location.hash)`), "#run=")
		a, _, _ := e.Store.GetRun(context.Background(), first)
		b, _, _ := e.Store.GetRun(context.Background(), second)
		if first == second || a.ThreadID != b.ThreadID || b.Harness != "scripted" {
			t.Fatalf("runs %s (thread %s) and %s (thread %s, %s): want two runs of one thread", first, a.ThreadID, second, b.ThreadID, b.Harness)
		}
		convThread = a.ThreadID
		turn := func(id, sel string) string {
			return `document.querySelector('section.turn[data-run="` + id + `"] ` + sel + `')`
		}
		checks := []struct{ what, expr string }{
			{"the first prompt", turn(first, ".prompt") + `.innerText.includes('git init -q')`},
			{"the answer text", turn(first, "p.text") + `.innerText.includes('the workspace is empty')`},
			{"reasoning, collapsed", `!` + turn(first, "details.reasoning") + `.open && ` + turn(first, "details.reasoning pre") + `.textContent === 'I should look at the workspace first'`},
			{"the tool call's name and command", turn(first, "details.tool summary") + `.textContent.startsWith('bash ls -a')`},
			{"the tool call's arguments", JSONArgs(turn(first, "details.tool pre.args"))},
			{"the tool call's result", turn(first, "details.tool pre.result") + `.textContent === '.  ..  .git'`},
			{"the second prompt", turn(second, ".prompt") + `.innerText.includes('notes.txt')`},
			{"a block per file", `document.querySelectorAll('section.turn[data-run="` + second + `"] .diff details.file').length === 2 && !!` + turn(second, `details.file[data-file="b.txt"]`)},
			{"added lines in green", `[...document.querySelectorAll('section.turn[data-run="` + second + `"] details.file[data-file="notes.txt"] .add')].map((s) => s.textContent).join('') === '+hello\n+world\n'`},
			{"the per-file count", turn(second, `details.file[data-file="notes.txt"] summary`) + `.textContent.includes('+2')`},
		}
		for _, c := range checks {
			if ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { try { return !!(`+c.expr+`); } catch (e) { return false; } })()`)); err != nil || !ok {
				t.Errorf("the conversation lacks %s (%v)", c.what, err)
			}
		}
		t.Logf("thread %s: %d turns, %d tool call(s), %d reasoning block(s), %d diff file block(s), %d of %d checks", convThread,
			p.num(`document.querySelectorAll('#out section.turn').length`), p.num(`document.querySelectorAll('#out details.tool').length`),
			p.num(`document.querySelectorAll('#out details.reasoning').length`), p.num(`document.querySelectorAll('#out details.file').length`), len(checks), len(checks))
		if os.Getenv("CORRAL_SCREENSHOT") == "1" {
			p.eval(`document.querySelectorAll('#out details.tool, #out details.reasoning').forEach((d) => { d.open = true; }), document.querySelector('main').scrollTop = 0, ''`)
			p.do(chromedp.EmulateViewport(1280, 1120))
			png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
			if err != nil {
				t.Fatal(err)
			}
			p.do(chromedp.EmulateReset())
			path := filepath.Join("..", "docs", "console.png")
			if err := os.WriteFile(path, png, 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("wrote %s (%d bytes, 1280x1120)", path, len(png))
		}
	})

	t.Run("checkpoints", func(t *testing.T) {
		p := page{t, ctx}
		const th = "ck-thread"
		startIn := func(prompt string) string {
			id := e.startJSON(pageToken, jsonBody(t, api.StartRun{Thread: th, Prompt: prompt}))
			e.waitStatus(id, store.RunCompleted, time.Minute)
			return id
		}
		startIn("echo one > f.txt")
		p.hash("#thread=" + th)
		p.wait(`document.querySelectorAll('#out section.turn').length === 1`, "the thread does not open")
		p.eval(`document.getElementById('ckbox').open = true, ''`)
		p.wait(`!document.getElementById('nockpt').hidden && document.querySelectorAll('#ckpts tr').length === 0`, "the empty checkpoint list is not shown")
		p.do(chromedp.SendKeys(chromedp.ID("cklabel"), "first"), chromedp.Click(chromedp.ID("cksavebtn")))
		p.wait(`document.querySelectorAll('#ckpts tr').length === 1 && /named/.test(document.querySelector('#ckpts tr').innerText) && /first/.test(document.querySelector('#ckpts tr').innerText) && !!document.querySelector('#ckpts tr .head')`, "the saved checkpoint is not listed as the head")
		cps, err := e.Store.ListCheckpoints(context.Background(), "", th)
		if err != nil || len(cps) != 1 || cps[0].Label != "first" || cps[0].Reason != store.CheckpointNamed {
			t.Fatalf("the store has %+v (%v), want one named checkpoint labelled first", cps, err)
		}
		ck := cps[0].ID
		row := `document.querySelector('#ckpts tr[data-ckpt="` + ck + `"]')`
		// Restore, after a run changed the file; Restore asks once more.
		startIn("echo two > f.txt")
		p.do(chromedp.Click(chromedp.CSS(`#ckpts tr[data-ckpt="` + ck + `"] button.restore`)))
		p.wait(row+`.querySelector('button.restore').textContent === 'Confirm restore'`, "Restore does not ask to confirm")
		p.do(chromedp.Click(chromedp.CSS(`#ckpts tr[data-ckpt="` + ck + `"] button.restore`)))
		p.wait(`/restored `+ck+`: 1 file/.test(document.getElementById('msg').textContent)`, "the restore is not reported")
		check := startIn("cat f.txt")
		e.waitLine(check, "one", time.Minute)
		// Fork: a new thread whose first checkpoint is a fork root.
		p.do(chromedp.Click(chromedp.CSS(`#ckpts tr[data-ckpt="` + ck + `"] button.fork`)))
		p.wait(`/forked into thread /.test(document.getElementById('msg').textContent) && document.getElementById('thread').value !== ''`, "the fork is not reported")
		forked := p.eval(`document.getElementById('thread').value`)
		fcps, err := e.Store.ListCheckpoints(context.Background(), "", forked)
		if err != nil || len(fcps) != 1 || fcps[0].Reason != store.CheckpointForkRoot || fcps[0].SourceCheckpointID != ck {
			t.Fatalf("the fork %s has %+v (%v), want a fork root of %s", forked, fcps, err, ck)
		}
		p.eval(`document.getElementById('thread').value = '', ''`)
		t.Logf("saved %s (label first), restored it over a change (the next run read %q), forked it into %s", ck, "one", forked)
	})

	t.Run("approval in the next run", func(t *testing.T) {
		p := page{t, ctx}
		for _, tc := range []struct{ button, want string }{{"allow", "ALLOWED"}, {"deny", "DENIED"}} {
			p.hash("#")
			p.do(chromedp.SetValue(chromedp.ID("harness"), "asker"), chromedp.SetValue(chromedp.ID("prompt"), "deploy it"), chromedp.Click(chromedp.ID("startbtn")))
			p.wait(`/finished: waiting for approval/.test(document.getElementById('out').innerText) && !!document.querySelector('#out .approval button.`+tc.button+`')`, "no approval to answer")
			first := strings.TrimPrefix(p.eval(`decodeURIComponent(location.hash)`), "#run=")
			p.do(chromedp.Click(chromedp.CSS(`#out .approval button.` + tc.button)))
			p.wait(`document.querySelectorAll('#out section.turn').length === 2 && /`+tc.want+` local:command:deploy prod/.test(document.getElementById('out').innerText)`, "the next run did not get the answer")
			second := strings.TrimPrefix(p.eval(`decodeURIComponent(location.hash)`), "#run=")
			a, _, _ := e.Store.GetRun(context.Background(), first)
			b, _, _ := e.Store.GetRun(context.Background(), second)
			if first == second || a.ThreadID != b.ThreadID || b.Harness != "asker" {
				t.Fatalf("runs %s and %s: want two asker runs of one thread", first, second)
			}
			if p.eval(`String(document.getElementById('answer').hidden)`) != "true" {
				t.Errorf("the answer note stays after the next run started")
			}
			t.Logf("%s on the ended run started %s in its thread, which printed %s", tc.button, second, tc.want)
		}
	})

	t.Run("approval while the turn waits", func(t *testing.T) {
		p := page{t, ctx}
		p.hash("#")
		p.do(chromedp.SetValue(chromedp.ID("harness"), "scripted"),
			chromedp.SetValue(chromedp.ID("prompt"), "echo '@wait live-1'; echo '@wait live-2'; sleep 60"), chromedp.Click(chromedp.ID("startbtn")))
		p.wait(`document.querySelectorAll('#out .approval').length === 2 && document.getElementById('status').textContent === 'running' && /waits/.test(document.querySelector('#out .approval .note').textContent)`, "no waiting approvals")
		id := strings.TrimPrefix(p.eval(`decodeURIComponent(location.hash)`), "#run=")
		p.do(chromedp.Click(chromedp.CSS(`#out .approval[data-approval="live-1"] button.allow`)))
		p.wait(`/sent to the waiting turn/.test(document.querySelector('#out .approval[data-approval="live-1"] .note').textContent)`, "the live answer was not sent")
		got := live.answers()
		if len(got) != 1 || got[0] != (liveAnswer{ApprovalID: "live-1", Allow: true}) {
			t.Fatalf("live answers received: %+v, want live-1 allowed", got)
		}
		// live-2 reaches the daemon: without live answers (404 here; 412
		// where the harness cannot wait) the answer goes with the next run.
		p.do(chromedp.Click(chromedp.CSS(`#out .approval[data-approval="live-2"] button.deny`)))
		p.wait(`/answer in the next run/.test(document.querySelector('#out .approval[data-approval="live-2"] .note').textContent) && /deny live-2/.test(document.getElementById('answer').textContent) && !document.getElementById('answer').hidden`, "no fallback to the next run")
		p.do(chromedp.Click(chromedp.ID("stop")))
		e.waitStatus(id, store.RunCancelled, time.Minute)
		t.Logf("live-1: POST {approvalId:live-1, allow:true} accepted (%d answer received); live-2: daemon refused live, page says %q", len(got),
			p.eval(`document.querySelector('#out .approval[data-approval="live-2"] .note').textContent`))
	})

	t.Run("sandboxes and destroy", func(t *testing.T) {
		p := page{t, ctx}
		p.hash("#sandboxes")
		sbs, err := e.client(pageToken).Sandboxes(testCtx(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		p.wait(`document.querySelectorAll('#sandboxes tr').length === `+itoa(len(sbs)), "the sandbox list does not show every sandbox")
		var key string
		for _, sb := range sbs {
			if sb.Thread == convThread {
				key = sb.Key
			}
		}
		if key == "" {
			t.Fatalf("no sandbox for thread %s among %d", convThread, len(sbs))
		}
		row := `document.querySelector('#sandboxes tr[data-key="` + key + `"]')`
		text := p.eval(row + `.innerText`)
		if !strings.Contains(text, "idle") || !strings.Contains(text, "local") {
			t.Errorf("the thread's sandbox row %q: want state idle and provider local", text)
		}
		p.do(chromedp.Click(chromedp.CSS(`#sandboxes tr[data-key="` + key + `"] button.destroy`)))
		p.wait(row+`.querySelector('button.destroy').textContent === 'Confirm destroy'`, "Destroy does not ask to confirm")
		if n := countSandboxes(t, e, key); n != 1 {
			t.Fatalf("the first click destroyed the sandbox")
		}
		p.do(chromedp.Click(chromedp.CSS(`#sandboxes tr[data-key="` + key + `"] button.destroy`)))
		p.wait(`!`+row+` && document.querySelectorAll('#sandboxes tr').length === `+itoa(len(sbs)-1), "the destroyed sandbox is still listed")
		if n := countSandboxes(t, e, key); n != 0 {
			t.Fatalf("the API still lists sandbox %s", key)
		}
		t.Logf("%d sandboxes listed (row %q); Destroy + confirm removed %s, %d left", len(sbs), strings.ReplaceAll(text, "\t", " "), key, len(sbs)-1)
	})

	t.Run("layout", func(t *testing.T) {
		p := page{t, ctx}
		p.hash("#thread=" + convThread)
		p.wait(`document.querySelectorAll('#out section.turn').length === 2`, "the thread does not open")
		layout := func() (header, overflow int, asideShown, mainShown bool) {
			header = p.num(`Math.round(document.querySelector('header').getBoundingClientRect().height)`)
			overflow = p.num(`Math.max(document.documentElement.scrollWidth - window.innerWidth, ...[...document.querySelectorAll('aside, main')].filter((e) => getComputedStyle(e).display !== 'none').map((e) => e.scrollWidth - e.clientWidth))`)
			asideShown = p.eval(`getComputedStyle(document.querySelector('aside')).display`) != "none"
			mainShown = p.eval(`getComputedStyle(document.querySelector('main')).display`) != "none"
			return
		}
		h, over, aside, main := layout()
		if h > 60 || over > 0 || !aside || !main {
			t.Errorf("at 1280 px: header %dpx, %dpx overflow, list shown %v, thread shown %v", h, over, aside, main)
		}
		t.Logf("1280x800: header %dpx, overflow %dpx, list and thread side by side", h, over)
		p.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
		h, over, aside, main = layout()
		if h > 110 || over > 0 || aside || !main {
			t.Errorf("at 390 px with a thread open: header %dpx, %dpx overflow, list shown %v, thread shown %v", h, over, aside, main)
		}
		p.do(chromedp.Click(chromedp.ID("back")))
		p.wait(`getComputedStyle(document.querySelector('aside')).display !== 'none' && getComputedStyle(document.querySelector('main')).display === 'none'`, "back does not show the list on a phone")
		h2, over2, _, _ := layout()
		if over2 > 0 {
			t.Errorf("the run list at 390 px overflows by %dpx", over2)
		}
		t.Logf("390x844: header %dpx/%dpx, overflow %dpx/%dpx (thread, list); one pane at a time", h, h2, over, over2)
	})
	if errs := pageErrs.get(); len(errs) > 0 {
		t.Errorf("the page reported errors: %q", errs)
	}
}

// JSONArgs is a JS expression: the element's text is the tool call's
// arguments, {"command":"ls -a"}, pretty-printed.
func JSONArgs(elem string) string {
	return `JSON.parse(` + elem + `.textContent).command === 'ls -a' && ` + elem + `.textContent.includes('\n')`
}

func countSandboxes(t *testing.T, e *env, key string) int {
	t.Helper()
	sbs, err := e.client(pageToken).Sandboxes(testCtx(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, sb := range sbs {
		if sb.Key == key {
			n++
		}
	}
	return n
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// liveAnswer is the body of POST /v1/runs/{id}/approvals.
type liveAnswer struct {
	ApprovalID string `json:"approvalId"`
	Allow      bool   `json:"allow"`
}
