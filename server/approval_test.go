package server_test

import (
	"context"
	"strings"

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
