// Package harness is the seam between corral's runner and the agents it
// runs: which command runs in the sandbox, and how the lines it writes to
// its journal become events.
//
// A harness sees the sandbox only through the contract. Its translator is
// pure and deterministic: the same journal lines always yield the same
// events with the same ids, so any host can replay a journal and take a run
// over (see package run).
package harness

import (
	"context"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/sandbox"
)

// Harness is one kind of agent.
type Harness interface {
	// Name is the harness's stable name, kept on the run record.
	Name() string
	// Prepare returns the command that runs the agent for a run. It may
	// write files into the sandbox (a prompt file, agent config).
	Prepare(ctx context.Context, h sandbox.Handle, req Request) (Invocation, error)
	// Translator returns a fresh translator for one run.
	Translator(run Run) Translator
}

// Request is what a run asks of its agent.
type Request struct {
	Run
	// Prompt is the user's instruction.
	Prompt string
	// Args is the command line, for harnesses that run a given command.
	Args []string
	// Env is added to the agent's environment.
	Env map[string]string
}

// Run identifies a run to its translator.
type Run struct {
	RunID    string
	ThreadID string
}

// Invocation is how to start the agent.
type Invocation struct {
	// Command is the agent's command (its Dir is a workspace path).
	Command sandbox.Command
	// StdinFile, when set, is a file inside the sandbox fed to the agent's
	// stdin.
	StdinFile string
}

// Translator turns one run's journal into events. It is deterministic:
// no clock, no randomness, ids from event.IDs.
type Translator interface {
	// Begin returns the events that open the run (RUN_STARTED); they are
	// stored before the agent starts.
	Begin() []event.Event
	// Line translates one journal line.
	Line(line []byte) []event.Event
	// End translates the agent's exit code into the closing events, which
	// end with RUN_FINISHED or RUN_ERROR.
	End(exitCode int) []event.Event
}
