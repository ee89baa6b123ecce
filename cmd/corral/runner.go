package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/bootstrap"
	"github.com/d10ffeed/corral/store"
)

// openRunner loads the definition and store the flags name and returns a
// runner over them. The caller closes both.
func (f *stateFlags) openRunner(ctx context.Context, out io.Writer) (*run.Runner, store.Store, error) {
	def, err := f.definition()
	if err != nil {
		return nil, nil, err
	}
	st, err := f.openStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	// Brokered secrets need the egress gateway: without a daemon, this
	// process serves it (on the fixed port, so a later attach serves it
	// again).
	var rp atomic.Pointer[run.Runner]
	g, err := startGateway(ctx, st, defsOf(def), gatewayListen, out, &rp)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	var broker run.Broker
	if g != nil {
		broker = g
	}
	r, err := run.New(st, defsOf(def), allHarnesses(), run.Options{
		Broker: broker,
		Logger: logger(),
		OnStep: func(_ string, ev bootstrap.StepEvent) {
			if ev.Done {
				fmt.Fprintf(out, "corral: setup %d/%d: exit %d in %s\n", ev.Index, ev.Total, ev.ExitCode, roundElapsed(ev.Elapsed))
			} else {
				fmt.Fprintf(out, "corral: setup %d/%d: %s\n", ev.Index, ev.Total, ev.Command)
			}
		},
	})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	rp.Store(r)
	return r, st, nil
}

// printer writes a run's events for a person: text to stdout, errors to
// stderr. It remembers the last sequence number it printed.
type printer struct {
	stdout, stderr io.Writer
	last           int64
	exitCode       *int
	failed         string
	raw            bool // print each event as JSON instead
	// progress prints the sandbox's preparation steps (sandbox.progress
	// events). Off where this process prepares the sandbox itself: the
	// provider prints its steps on the terminal already.
	progress bool
}

func (p *printer) print(e store.Event) error {
	p.last = e.Seq
	if p.raw {
		_, err := fmt.Fprintf(p.stdout, "%d %s\n", e.Seq, e.Data)
		return err
	}
	ev, err := event.Unmarshal(e.Data)
	if err != nil {
		return err
	}
	switch ev.Type {
	case event.TextMessageContent, event.ReasoningContent:
		_, err = io.WriteString(p.stdout, ev.Delta)
	case event.ToolCallStart:
		_, err = fmt.Fprintf(p.stderr, "corral: tool %s\n", ev.ToolCallName)
	case event.Custom:
		if ev.Name == event.SandboxProgress && p.progress {
			var s sandbox.ProgressStep
			if json.Unmarshal(ev.Value, &s) == nil {
				err = printProgress(p.stderr, s)
			}
		}
		if ev.Name == event.PolicyUnenforced {
			err = printPolicyNotice(p.stderr, ev.Value)
		}
		if ev.Name == event.ApprovalRequested {
			var a event.Approval
			if json.Unmarshal(ev.Value, &a) == nil && a.ID != "" {
				what := a.Title
				if what == "" {
					what = a.Kind + " " + a.Target
				}
				_, err = fmt.Fprintf(p.stderr, "corral: approval needed: %s\ncorral:   answer in the thread's next run: --approve %s (or --deny)\n", what, sandbox.ShellQuote(a.ID))
			}
		}
		if ev.Name == event.ApprovalWaiting {
			var w struct {
				ID   string `json:"approvalId"`
				Wait string `json:"wait"`
			}
			if json.Unmarshal(ev.Value, &w) == nil && w.ID != "" {
				within := ""
				if w.Wait != "" {
					within = " within " + w.Wait
				}
				_, err = fmt.Fprintf(p.stderr, "corral:   or now%s, while the turn waits: corral answer %s %s --allow (or --deny)\n", within, sandbox.ShellQuote(e.RunID), sandbox.ShellQuote(w.ID))
			}
		}
		if ev.Name == event.ApprovalAnswered {
			var a event.ApprovalAnswer
			if json.Unmarshal(ev.Value, &a) == nil && a.ApprovalID != "" {
				verdict := "denied"
				if a.Allowed {
					verdict = "allowed"
				}
				by := map[string]string{"answer": "by an answer", "deadline": "by its deadline", "cancelled": "by the cancel"}[a.By]
				if by == "" {
					by = "by " + a.By
				}
				_, err = fmt.Fprintf(p.stderr, "corral: approval %s %s %s\n", sandbox.ShellQuote(a.ApprovalID), verdict, by)
			}
		}
	case event.RunFinished:
		p.exitCode = ev.ExitCode
		if ev.Cancelled() {
			_, err = fmt.Fprintln(p.stderr, "corral: the run was cancelled")
		}
	case event.RunError:
		p.exitCode = ev.ExitCode
		p.failed = ev.Message
		if ev.Code != "exit" {
			_, err = fmt.Fprintf(p.stderr, "corral: %s\n", strings.TrimSpace(ev.Message))
		}
	}
	return err
}

// printProgress prints one preparation step as a line.
func printProgress(w io.Writer, s sandbox.ProgressStep) error {
	line := "corral: " + s.Phase + " " + s.Subject
	if s.Part != "" {
		line += " " + s.Part
	}
	line += ": " + s.Status
	if s.Total > 0 {
		line += fmt.Sprintf(" (%d bytes)", s.Total)
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

// exit drops the message of a failed run's exit error when the run's
// RUN_ERROR event already printed it, so an error is said once.
func (p *printer) exit(err error) error {
	var ee *exitError
	if p.failed != "" && errors.As(err, &ee) && ee.err != nil {
		return &exitError{code: ee.code}
	}
	return err
}

// printPolicyNotice warns that the run's harness cannot enforce some rules
// of its policy: one warning line, then a line per rule with why.
func printPolicyNotice(w io.Writer, value json.RawMessage) error {
	var n event.PolicyNotice
	if json.Unmarshal(value, &n) != nil || len(n.Rules) == 0 {
		return nil
	}
	names := make([]string, len(n.Rules))
	for i, r := range n.Rules {
		names[i] = ruleName(r)
	}
	if _, err := fmt.Fprintf(w, "corral: warning: the %s harness cannot enforce these rules of the policy: %s\n", n.Harness, strings.Join(names, ", ")); err != nil {
		return err
	}
	for _, r := range n.Rules {
		if _, err := fmt.Fprintf(w, "corral:   %s: %s\n", ruleName(r), r.Reason); err != nil {
			return err
		}
	}
	return nil
}

// ruleName is a policy rule as a person reads it: commands.deny "rm *",
// fileWrite deny.
func ruleName(r event.UnenforcedRule) string {
	if r.Pattern != "" {
		return r.Rule + " " + strconv.Quote(r.Pattern)
	}
	return r.Rule + " " + r.Decision
}

// errNoRun is how every command says a run id names nothing. It exits
// with code 1 like any error; scripts can match the text "no such run".
func errNoRun(id string) error { return fmt.Errorf("no such run: %s", id) }

// runExists fails with errNoRun when the store has no run id.
func runExists(ctx context.Context, st store.Store, id string) error {
	if _, ok, err := st.GetRun(ctx, id); err != nil {
		return err
	} else if !ok {
		return errNoRun(id)
	}
	return nil
}
