package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

func newAnswerCmd() *cobra.Command {
	var (
		sf          stateFlags
		rf          remoteFlags
		allow, deny bool
	)
	cmd := &cobra.Command{
		Use:   "answer RUN APPROVAL (--allow | --deny)",
		Short: "Answer an approval a live run is waiting for",
		Long: `Answer an approval request while the run's turn waits for it (the
acp, claude-code and opencode server-mode harnesses, run with
--option approvalWait=DURATION). Any process with the run's store can
answer, whichever process drives the run; the agent goes on in the same
turn. RUN and APPROVAL are what "corral run" printed with the request.

A request nobody waits for any more (its deadline passed, or the run
ended) cannot be answered here: answer it in the thread's next run with
--approve or --deny.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if allow == deny {
				return sandbox.Errorf(sandbox.InvalidArgument, "answer", args[0], "give exactly one of --allow and --deny")
			}
			ctx := cmd.Context()
			runID, approvalID := args[0], args[1]
			if rf.server != "" {
				c, err := rf.client()
				if err != nil {
					return err
				}
				evs, err := c.Logs(ctx, runID, 0)
				if err != nil {
					return err
				}
				if err := checkWaiting(runID, approvalID, evs); err != nil {
					return err
				}
				if err := c.Answer(ctx, runID, approvalID, allow); err != nil {
					return err
				}
			} else {
				r, st, err := sf.openRunner(ctx, cmd.ErrOrStderr())
				if err != nil {
					return err
				}
				defer st.Close()
				defer r.Close(context.WithoutCancel(ctx))
				if err := runExists(ctx, st, runID); err != nil {
					return err
				}
				evs, err := st.ReadEvents(ctx, runID, 0, 0)
				if err != nil {
					return err
				}
				if err := checkWaiting(runID, approvalID, evs); err != nil {
					return err
				}
				if err := r.Answer(ctx, runID, approvalID, allow); err != nil {
					return err
				}
			}
			verdict := "denied"
			if allow {
				verdict = "allowed"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s %s\n", runID, approvalID, verdict)
			return nil
		},
	}
	sf.register(cmd)
	rf.register(cmd)
	cmd.Flags().BoolVar(&allow, "allow", false, "allow the request")
	cmd.Flags().BoolVar(&deny, "deny", false, "deny the request")
	return cmd
}

// checkWaiting refuses an answer to a request the run's events do not show
// waiting: one never asked (a mistyped id: the waiting ones are named), or
// one already settled (by an answer, its deadline or a cancel).
func checkWaiting(runID, approvalID string, evs []store.Event) error {
	var waiting []string
	settled := map[string]event.ApprovalAnswer{}
	for _, e := range evs {
		ev, err := event.Unmarshal(e.Data)
		if err != nil || ev.Type != event.Custom {
			continue
		}
		switch ev.Name {
		case event.ApprovalWaiting:
			var w struct {
				ID string `json:"approvalId"`
			}
			if json.Unmarshal(ev.Value, &w) == nil && w.ID != "" {
				waiting = append(waiting, w.ID)
			}
		case event.ApprovalAnswered:
			var a event.ApprovalAnswer
			if json.Unmarshal(ev.Value, &a) == nil {
				settled[a.ApprovalID] = a
			}
		}
	}
	if a, ok := settled[approvalID]; ok {
		verdict := "denied"
		if a.Allowed {
			verdict = "allowed"
		}
		return sandbox.Errorf(sandbox.FailedPrecondition, "answer", runID, "request %s was already settled: %s by %s", sandbox.ShellQuote(approvalID), verdict, a.By)
	}
	var open []string
	for _, id := range waiting {
		if id == approvalID {
			return nil
		}
		if _, ok := settled[id]; !ok {
			open = append(open, sandbox.ShellQuote(id))
		}
	}
	if len(open) == 0 {
		return sandbox.Errorf(sandbox.NotFound, "answer", runID, "no request %s is waiting in this run, and none other is", sandbox.ShellQuote(approvalID))
	}
	return sandbox.Errorf(sandbox.NotFound, "answer", runID, "no request %s is waiting in this run; waiting: %s", sandbox.ShellQuote(approvalID), strings.Join(open, ", "))
}
