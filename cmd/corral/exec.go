package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/spf13/cobra"
)

// execFailure is the exit code of "corral exec" when corral itself fails
// (as opposed to the command), following docker run's convention.
const execFailure = 125

func newExecCmd() *cobra.Command {
	var (
		pf   providerFlags
		envs []string
		keep bool
	)
	cmd := &cobra.Command{
		Use:   "exec [flags] -- CMD [ARGS...]",
		Short: "Run a command in a fresh sandbox",
		Long: `Create a sandbox, run one command in it with live output, and destroy the
sandbox (unless --keep). corral exits with the command's exit code, or 125
when corral itself fails.`,
		Example: `  corral exec -- echo hello
  corral exec --env NAME=value -- sh -c 'echo "$NAME"'
  corral exec --dir ./project -- ls
  corral exec --provider docker --image corral-test-base --network none -- ls /sys/class/net`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &exitError{code: execFailure, err: errors.New("no command given: corral exec [flags] -- CMD [ARGS...]")}
			}
			env, err := parseEnv(envs)
			if err != nil {
				return &exitError{code: execFailure, err: err}
			}
			code, err := runExec(cmd, &pf, env, keep, args)
			if err != nil {
				return &exitError{code: execFailure, err: err}
			}
			if code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
	pf.register(cmd, "local")
	cmd.Flags().StringArrayVarP(&envs, "env", "e", nil, "set an environment variable `K=V` in the sandbox (repeatable)")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the sandbox afterwards and print its id")
	return cmd
}

func parseEnv(kvs []string) (map[string]string, error) {
	env := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--env %q: want NAME=value", kv)
		}
		if err := sandbox.ValidateEnvName(k); err != nil {
			return nil, err
		}
		env[k] = v
	}
	return env, nil
}

func runExec(cmd *cobra.Command, pf *providerFlags, env map[string]string, keep bool, args []string) (code int, err error) {
	p, err := pf.open(true)
	if err != nil {
		return 0, err
	}
	defer closeProvider(p)
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	co := pf.createOptions()
	co.Env = env
	h, err := p.Create(ctx, co)
	if err != nil {
		return 0, err
	}
	defer func() {
		if keep {
			fmt.Fprintf(cmd.ErrOrStderr(), "corral: sandbox kept: %s (provider %s)\n", h.ID(), p.Name())
			return
		}
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if derr := h.Destroy(dctx); derr != nil && err == nil {
			err = fmt.Errorf("destroy sandbox: %w", derr)
		}
	}()

	pr, err := h.Spawn(ctx, sandbox.Command{Args: args})
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(cmd.OutOrStdout(), pr.Stdout()) })
	wg.Go(func() { _, _ = io.Copy(cmd.ErrOrStderr(), pr.Stderr()) })
	if h.Capabilities().WritableStdin {
		go func() {
			_, _ = io.Copy(pr.Stdin(), cmd.InOrStdin())
			_ = pr.Stdin().Close()
		}()
	}
	code, err = pr.Wait(context.Background())
	wg.Wait()
	if err != nil {
		return 0, err
	}
	if ctx.Err() != nil && code == 0 {
		code = 130
	}
	return code, nil
}
