package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/spf13/cobra"
)

func defsOf(d *sandbox.Definition) []*sandbox.Definition { return []*sandbox.Definition{d} }

func newRunCmd() *cobra.Command {
	var (
		sf      stateFlags
		rf      remoteFlags
		thread  string
		detach  bool
		hname   string
		model   string
		mode    string
		auth    string
		options []string
		approve []string
		deny    []string
	)
	cmd := &cobra.Command{
		Use:   "run [flags] -- CMD [ARGS...] | run --harness NAME [flags] PROMPT",
		Short: "Start a durable run and stream its output",
		Long: `Start a durable run of a command in the thread's sandbox (from corral.yaml or
--config) and stream its output. The command writes to a journal inside the
sandbox, so the run survives this process: Ctrl-C detaches (the run goes
on; "corral attach RUN" picks it up), "corral cancel RUN" stops it. corral
exits with the command's exit code.`,
		Example: `  corral run -- sh -c 'for i in $(seq 1 50); do echo $i; sleep 0.1; done'
  corral run --thread t1 --detach -- make test
  corral run --thread t1 --harness claude-code --model claude-sonnet-4-5 "fix the failing test"
  corral run --thread t1 --harness claude-code --mode plan "how would you fix the failing test?"
  corral run --harness "acp:my-agent --acp" "summarize the repository"
  corral run --thread t1 --harness opencode --approve "opencode:command:npm publish" "go ahead"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			h, acpArgs, err := resolveHarness(hname)
			if err != nil {
				return err
			}
			req := run.StartRequest{Thread: thread, Tenant: sf.tenant, Harness: h.Name(), Model: model, Mode: mode, Auth: harness.Auth(auth)}
			switch {
			case h.Name() == command.Name:
				if len(args) == 0 {
					return errors.New("no command given: corral run [flags] -- CMD [ARGS...]")
				}
				req.Args = args
			default:
				req.Prompt = strings.TrimSpace(strings.Join(args, " "))
				if req.Prompt == "" {
					return fmt.Errorf("no prompt given: corral run --harness %s [flags] \"PROMPT\"", hname)
				}
				req.Args = acpArgs
			}
			switch req.Auth {
			case "", harness.AuthAPIKey, harness.AuthHost:
			default:
				return fmt.Errorf("--auth %q: want api-key or host", auth)
			}
			if req.Options, err = parseOptions(options); err != nil {
				return err
			}
			if req.Approvals, err = parseApprovals(approve, deny); err != nil {
				return err
			}
			ctx := cmd.Context()
			if rf.server != "" {
				c, err := rf.client()
				if err != nil {
					return err
				}
				start := api.StartRun{Thread: req.Thread, Harness: req.Harness, Prompt: req.Prompt, Args: req.Args,
					Model: req.Model, Mode: req.Mode, Auth: string(req.Auth), Options: req.Options, Approvals: req.Approvals}
				if !detach {
					return startRemote(cmd, c, start)
				}
				rec, err := c.Start(ctx, start)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "corral: run %s (thread %s) started detached; attach with: corral attach --server ... %s\n", rec.ID, rec.Thread, rec.ID)
				fmt.Fprintln(cmd.OutOrStdout(), rec.ID)
				return nil
			}
			r, st, err := sf.openRunner(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer st.Close()
			def, _ := sf.definition()
			req.Definition = def.ID
			printBrokered(cmd.ErrOrStderr(), def, "served by this process on "+gatewayListen+" (no daemon): the run's model calls stop while no corral process serves it; corral attach serves it again")
			rec, err := r.Start(ctx, req)
			if err != nil {
				return err
			}
			if detach {
				if err := r.WaitStarted(ctx, rec.ID); err != nil {
					return err
				}
				if err := detachRun(cmd, r, st, rec.ID, nil); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "corral: run %s (thread %s) started detached; attach with: corral attach %s\n", rec.ID, rec.ThreadID, rec.ID)
				fmt.Fprintln(cmd.OutOrStdout(), rec.ID)
				return nil
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "corral: run %s (thread %s)\n", rec.ID, rec.ThreadID)
			return streamRun(cmd, r, st, rec.ID, 0, false)
		},
	}
	sf.register(cmd)
	rf.register(cmd)
	cmd.Flags().StringVar(&thread, "thread", "", "thread the run belongs to (default: a new one)")
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "start the run, print its id on stdout and exit 0 (id=$(corral run -d ...))")
	cmd.Flags().StringVar(&hname, "harness", command.Name, "the agent: "+strings.Join(harnessNames(), ", ")+", or acp:<agent command>")
	cmd.Flags().StringVar(&model, "model", "", "the model the agent uses (default: the agent's)")
	cmd.Flags().StringVar(&mode, "mode", "", "the agent's mode: Claude Code's permission mode (plan, acceptEdits, ...), OpenCode's agent (build, plan), an ACP session mode")
	cmd.Flags().StringVar(&auth, "auth", "", "api-key (a workspace secret) or host (the agent CLI's own login)")
	cmd.Flags().StringArrayVar(&options, "option", nil, "a harness option `K=V` (repeatable), e.g. executable=/path/to/cli")
	cmd.Flags().StringArrayVar(&approve, "approve", nil, "allow what an earlier run of the thread asked for: its approval `ID` (repeatable)")
	cmd.Flags().StringArrayVar(&deny, "deny", nil, "refuse what an earlier run of the thread asked for: its approval `ID` (repeatable)")
	return cmd
}

func parseOptions(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--option %q: want KEY=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

// streamRun prints the run's events after offset until it ends; Ctrl-C
// detaches. With takeover it first takes the run over when nobody drives
// it. It returns an exitError carrying the agent's exit code.
func streamRun(cmd *cobra.Command, r *run.Runner, st store.Store, runID string, after int64, takeover bool) error {
	sigCtx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	p := &printer{stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(), last: after}
	var err error
	if takeover {
		err = r.Attach(sigCtx, runID, after, p.print)
	} else {
		err = r.Follow(sigCtx, runID, after, p.print)
	}
	if sigCtx.Err() != nil && cmd.Context().Err() == nil {
		return detachAndReport(cmd, r, st, runID, p)
	}
	if err != nil {
		return err
	}
	if err := r.Wait(cmd.Context(), runID); err != nil {
		return err
	}
	rec, _, err := st.GetRun(cmd.Context(), runID)
	if err != nil {
		return err
	}
	return p.exit(runExit(rec))
}

// detachAndReport detaches the run, prints what was appended but not yet
// printed (so "corral attach" continues exactly where this left off), and
// says how to come back.
func detachAndReport(cmd *cobra.Command, r *run.Runner, st store.Store, runID string, p *printer) error {
	if err := detachRun(cmd, r, st, runID, p); err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "corral: detached; run %s goes on. Attach with: corral attach %s\n", runID, runID)
	return &exitError{code: 130}
}

// detachRun detaches the run and prints what p has not printed yet.
func detachRun(cmd *cobra.Command, r *run.Runner, st store.Store, runID string, p *printer) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 30*time.Second)
	defer cancel()
	if err := r.Detach(ctx, runID); err != nil {
		return err
	}
	if p != nil {
		evs, err := st.ReadEvents(ctx, runID, p.last, 0)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if err := p.print(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// runExit turns a finished run into the CLI's exit.
func runExit(rec store.Run) error {
	switch {
	case rec.Status == store.RunCompleted:
		return nil
	case rec.ExitCode != nil && *rec.ExitCode != 0:
		return &exitError{code: *rec.ExitCode}
	case rec.Status.Terminal():
		msg := string(rec.Status)
		if rec.Error != "" {
			msg += ": " + rec.Error
		}
		return &exitError{code: 1, err: fmt.Errorf("run %s %s", rec.ID, msg)}
	}
	return nil
}

// parseApprovals turns --approve and --deny ids into approval answers; an
// id given both ways is an error.
func parseApprovals(approve, deny []string) (map[string]bool, error) {
	if len(approve)+len(deny) == 0 {
		return nil, nil
	}
	out := map[string]bool{}
	for _, id := range approve {
		if id = strings.TrimSpace(id); id == "" {
			return nil, errors.New("--approve: empty approval id")
		}
		out[id] = true
	}
	for _, id := range deny {
		if id = strings.TrimSpace(id); id == "" {
			return nil, errors.New("--deny: empty approval id")
		}
		if out[id] {
			return nil, fmt.Errorf("approval %s is both approved and denied", id)
		}
		out[id] = false
	}
	return out, nil
}
