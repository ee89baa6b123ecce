// Command corral runs commands and coding agents inside sandboxes.
//
// Each subcommand lives in its own file. Run "corral help" for the list.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	os.Exit(runCLI(os.Args[1:]))
}

// runCLI executes the CLI with args and returns the process exit code.
func runCLI(args []string) int {
	root := newRootCmd()
	root.SetArgs(args)
	err := root.Execute()
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ee.err != nil {
			fmt.Fprintln(os.Stderr, "corral:", ee.err)
		}
		return ee.code
	default:
		fmt.Fprintln(os.Stderr, "corral:", err)
		return 1
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "corral",
		Short: "Run coding agents inside sandboxes and keep their runs alive",
		Long: `corral runs commands and coding agents inside sandboxes (host processes,
Docker containers, cloud sandboxes) behind one contract.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.HiddenDefaultCmd = true
	root.AddCommand(newVersionCmd(), newProvidersCmd(), newExecCmd(), newUpCmd(), newDownCmd(), newRunCmd(), newAttachCmd(), newPsCmd(), newLogsCmd(), newCancelCmd(), newAnswerCmd(), newReapCmd(), newSandboxCmd(), newCheckpointCmd(), newServeCmd())
	return root
}

// exitError ends the process with a given code, printing err (if any) as
// one line.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }
