package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/sandbox"
)

// asker is a test harness whose agent asks for approval: it prints
// "ASK <id>" (an approval.requested event) unless the run's approvals
// answer that id, and then prints "ALLOWED <id>" or "DENIED <id>".
type asker struct{}

const askID = "local:command:deploy prod"

func (asker) Name() string { return "asker" }

func (asker) Prepare(_ context.Context, _ sandbox.Handle, req harness.Request) (harness.Invocation, error) {
	line := "ASK " + askID
	if ok, given := req.Approvals[askID]; given {
		line = map[bool]string{true: "ALLOWED ", false: "DENIED "}[ok] + askID
	}
	return harness.Invocation{Command: sandbox.Command{Args: []string{"echo", line}}}, nil
}

func (asker) Translator(run harness.Run) harness.Translator {
	return &askTranslator{Translator: command.Harness{}.Translator(run)}
}

type askTranslator struct{ harness.Translator }

func (t *askTranslator) Line(line []byte) []event.Event {
	if id, ok := strings.CutPrefix(string(line), "ASK "); ok {
		return []event.Event{event.CustomEvent(event.ApprovalRequested, event.Approval{ID: id, Kind: "command", Target: "deploy prod"})}
	}
	return t.Translator.Line(line)
}

// TestApprovalInBrowser: a run asks; the page shows Allow and Deny; Allow
// prepares the thread's next run in the form, which goes out with the
// answer, and the agent sees it.
func TestApprovalInBrowser(t *testing.T) {
	e := newEnv(t, envOptions{Extra: []harness.Harness{asker{}}, Tokens: map[string]string{pageToken: ""}})
	ctx, _ := newBrowser(t)
	openWithToken(t, ctx, e.URL+"/?token="+pageToken, pageToken)
	if err := waitJS(ctx, `document.querySelectorAll('#harness option').length === 2`, time.Minute); err != nil {
		t.Fatalf("the form's choices did not load: %v", err)
	}
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("harness"), "asker"),
		chromedp.SendKeys(chromedp.ID("prompt"), "deploy it"),
		chromedp.Click(chromedp.ID("startbtn")),
	); err != nil {
		t.Fatal(err)
	}
	if err := waitJS(ctx, `!!document.querySelector('#out .approval button')`, time.Minute); err != nil {
		t.Fatalf("no approval shown: %v", err)
	}
	first, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash.slice(5)`))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#out .approval button`))); err != nil { // Allow
		t.Fatal(err)
	}
	if err := waitJS(ctx, `!document.getElementById('answer').hidden && document.getElementById('thread').value !== ''`, time.Minute); err != nil {
		t.Fatalf("Allow did not prepare the next run: %v", err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("startbtn"))); err != nil {
		t.Fatal(err)
	}
	if err := waitJS(ctx, `/ALLOWED local:command:deploy prod/.test(document.getElementById('out').textContent)`, time.Minute); err != nil {
		t.Fatalf("the next run did not get the answer: %v", err)
	}
	second, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash.slice(5)`))
	if err != nil {
		t.Fatal(err)
	}
	a, _, _ := e.Store.GetRun(context.Background(), first)
	b, _, _ := e.Store.GetRun(context.Background(), second)
	if first == second || a.ThreadID == "" || a.ThreadID != b.ThreadID || b.Harness != "asker" {
		t.Errorf("runs %s (thread %s) and %s (thread %s, harness %s): want two runs of one thread", first, a.ThreadID, second, b.ThreadID, b.Harness)
	}
	if hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('answer').hidden`)); err != nil || !hidden {
		t.Errorf("the answer note stays after the run started (%v)", err)
	}
}
