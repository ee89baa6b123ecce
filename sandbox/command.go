package sandbox

import (
	"context"
	"io"
	"syscall"
	"time"
)

// Command is what Exec and Spawn run. Exactly one of Args and Shell is set:
// Args is an argv run without a shell (the default, and what callers should
// use); Shell is a script run by "sh -c", an explicit choice for callers
// that need pipes or redirections. Values never get concatenated into shell
// text unquoted: use ShellQuote.
type Command struct {
	// Args is the program and its arguments.
	Args []string
	// Shell is a POSIX sh script, run as sh -c Shell.
	Shell string
	// Dir is the working directory, a path under the portable root
	// "/workspace" (relative paths are relative to it). Empty means the
	// workspace root.
	Dir string
	// Env is laid over the sandbox's environment for this command only.
	Env map[string]string
	// Stdin, when set, is copied to the command's standard input (Exec
	// only; a spawned process has Process.Stdin instead).
	Stdin io.Reader
	// Timeout, when positive, ends the command after this long as if ctx had
	// expired: Exec returns DeadlineExceeded; a spawned process is killed
	// once Timeout has passed after Spawn returned (its Wait reports the
	// signal's exit code). Guard enforces it whatever the provider does.
	Timeout time.Duration
	// OutputLimit, when positive, bounds how many bytes of each of stdout
	// and stderr Exec keeps in memory; the rest is read and discarded, and
	// ExecResult says it was truncated. Zero keeps everything. Guard cuts
	// the result to it even when a provider kept more.
	OutputLimit int
}

// Argv returns the argv the command runs: Args, or sh -c Shell.
func (c Command) Argv() []string {
	if c.Shell != "" {
		return []string{"sh", "-c", c.Shell}
	}
	return c.Args
}

// String returns the command as shell text, for messages. It is never run.
func (c Command) String() string {
	if c.Shell != "" {
		return c.Shell
	}
	return ShellJoin(c.Args)
}

// Validate checks that exactly one of Args and Shell is set, that the
// environment names are usable and that Dir is a workspace path.
func (c Command) Validate() error {
	switch {
	case len(c.Args) == 0 && c.Shell == "":
		return Errorf(InvalidArgument, "command", "", "no command: set Args or Shell")
	case len(c.Args) > 0 && c.Shell != "":
		return Errorf(InvalidArgument, "command", "", "both Args and Shell are set; choose one")
	case len(c.Args) > 0 && c.Args[0] == "":
		return Errorf(InvalidArgument, "command", "", "empty program name")
	}
	for k := range c.Env {
		if err := ValidateEnvName(k); err != nil {
			return err
		}
	}
	if c.Dir != "" {
		if _, err := CleanPath(c.Dir); err != nil {
			return err
		}
	}
	return nil
}

// ValidateEnvName rejects environment variable names that cannot be set:
// empty, or containing '=' or NUL.
func ValidateEnvName(name string) error {
	if name == "" {
		return Errorf(InvalidArgument, "env", "", "empty variable name")
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '=' || name[i] == 0 {
			return Errorf(InvalidArgument, "env", name, "variable name contains '=' or NUL")
		}
	}
	return nil
}

// ExecResult is the outcome of a command that ran to completion.
type ExecResult struct {
	ExitCode int    // the command's exit code; 128+N when killed by signal N
	Stdout   []byte // captured standard output (bounded by OutputLimit)
	Stderr   []byte // captured standard error (bounded by OutputLimit)
	// StdoutTruncated and StderrTruncated say that OutputLimit cut the
	// stream.
	StdoutTruncated bool
	StderrTruncated bool
}

// Process is a command started by Spawn.
type Process interface {
	// PID is the process id inside the sandbox, or -1 when the provider
	// cannot tell.
	PID() int
	// Stdout streams the process's standard output until it ends.
	Stdout() io.Reader
	// Stderr streams the process's standard error until it ends.
	Stderr() io.Reader
	// Stdin writes to the process's standard input; Close sends EOF. On
	// providers without Capabilities().WritableStdin every write fails with
	// an UnsupportedCapabilityError.
	Stdin() io.WriteCloser
	// Wait blocks until the process exits and returns its exit code (128+N
	// when killed by signal N). An error means ctx ended first or the
	// transport failed.
	Wait(ctx context.Context) (int, error)
	// Kill sends sig (SIGTERM when zero) to the process and every process it
	// started. After SIGTERM the provider waits a grace period and then sends
	// SIGKILL to whatever is left. Kill returns once the processes are gone
	// or the provider cannot do more; killing an exited process succeeds.
	Kill(ctx context.Context, sig syscall.Signal) error
}
