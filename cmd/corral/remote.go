package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/client"
	"github.com/d10ffeed/corral/store"
	"github.com/spf13/cobra"
)

// remoteFlags send a command through a daemon instead of running it in
// this process.
type remoteFlags struct {
	server string
	token  string
}

func (f *remoteFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.server, "server", os.Getenv("CORRAL_SERVER"), "go through the daemon at this URL (e.g. http://127.0.0.1:7777; env CORRAL_SERVER)")
	cmd.Flags().StringVar(&f.token, "token", "", "the daemon's bearer token (env CORRAL_TOKEN; default for a loopback --server: the token a local corral serve keeps in "+displayStateDir()+")")
}

func (f *remoteFlags) client() (*client.Client, error) {
	tok, err := client.ResolveToken(f.server, f.token)
	if err != nil {
		return nil, err
	}
	return client.New(f.server, tok)
}

// streamRemote prints a run's events from the daemon after offset until
// the run ends; Ctrl-C stops watching (the daemon keeps the run).
func streamRemote(cmd *cobra.Command, c *client.Client, runID string, after int64) error {
	return followRemote(cmd, c, after, func(ctx context.Context, p *printer) (string, error) {
		return runID, c.Events(ctx, runID, after, p.print)
	})
}

// startRemote starts a run through the daemon and prints its events,
// streamed on the start's own request (client.StartEvents), until it
// ends; Ctrl-C stops watching (the daemon keeps the run).
func startRemote(cmd *cobra.Command, c *client.Client, req api.StartRun) error {
	return followRemote(cmd, c, 0, func(ctx context.Context, p *printer) (string, error) {
		return c.StartEvents(ctx, req, func(id, thread string) {
			fmt.Fprintf(cmd.ErrOrStderr(), "corral: run %s (thread %s)\n", id, thread)
		}, p.print)
	})
}

// followRemote prints what follow streams (the id of the run it follows,
// "" when none was started) and exits as the run did.
func followRemote(cmd *cobra.Command, c *client.Client, after int64, follow func(context.Context, *printer) (string, error)) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	p := &printer{stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(), last: after, progress: true}
	runID, err := follow(ctx, p)
	if ctx.Err() != nil && cmd.Context().Err() == nil {
		if runID == "" {
			fmt.Fprintln(cmd.ErrOrStderr(), "corral: interrupted before the daemon answered; the run may have started (corral runs --server ... lists it)")
		} else {
			fmt.Fprintf(cmd.ErrOrStderr(), "corral: detached; run %s goes on. Attach with: corral attach --server ... %s\n", runID, runID)
		}
		return &exitError{code: 130}
	}
	if err != nil {
		return err
	}
	r, err := c.Run(cmd.Context(), runID)
	if err != nil {
		return err
	}
	return p.exit(runExit(fromAPI(r)))
}

// fromAPI is the part of a run record the CLI's exit needs.
func fromAPI(r api.Run) store.Run {
	return store.Run{ID: r.ID, Status: store.RunStatus(r.Status), ExitCode: r.ExitCode, Error: r.Error}
}

func cancelRemote(cmd *cobra.Command, c *client.Client, runID string, wait time.Duration) error {
	r, err := c.Cancel(cmd.Context(), runID)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), wait)
	defer cancel()
	for !store.RunStatus(r.Status).Terminal() {
		select {
		case <-ctx.Done():
			fmt.Fprintf(cmd.OutOrStdout(), "%s cancel requested (still %s)\n", r.ID, r.Status)
			return nil
		case <-time.After(100 * time.Millisecond):
		}
		if r, err = c.Run(cmd.Context(), runID); err != nil {
			return err
		}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", r.ID, r.Status)
	return nil
}
