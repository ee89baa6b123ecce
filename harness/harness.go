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
	"bytes"
	"context"
	"strings"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/sandbox"
)

// Harness is one kind of agent.
type Harness interface {
	// Name is the harness's stable name, kept on the run record.
	Name() string
	// Prepare returns the command that runs the agent for a run. It may
	// write files into the sandbox (agent configuration, a prompt file);
	// files that carry secrets are listed in Invocation.Cleanup.
	Prepare(ctx context.Context, h sandbox.Handle, req Request) (Invocation, error)
	// Translator returns a fresh translator for one run.
	Translator(run Run) Translator
}

// Auth is how an agent CLI authenticates.
type Auth string

// Auth modes.
const (
	// AuthAPIKey passes an API key from a workspace secret (the harness
	// documents which secret name it reads) through the environment or a
	// per-run config file, never argv.
	AuthAPIKey Auth = "api-key"
	// AuthHost lets the CLI use its own login on the host (the local
	// provider): keys in the environment that would override that login are
	// removed from the agent's environment.
	AuthHost Auth = "host"
)

// Request is what a run asks of its agent.
type Request struct {
	Run
	// Prompt is the user's instruction.
	Prompt string
	// Args is the command line, for harnesses that run a given command (and
	// extra CLI arguments for the others).
	Args []string
	// Env is added to the agent's environment.
	Env map[string]string
	// Model names the model; empty means the CLI's default.
	Model string
	// Mode is the agent's mode for the run (Claude Code's permission mode,
	// OpenCode's agent, an ACP session mode); empty means its default. Only
	// harnesses that implement Moder take one; run.Start refuses it for the
	// others.
	Mode string
	// Auth is the auth mode; empty means AuthAPIKey.
	Auth Auth
	// Secrets are the workspace's secrets (for AuthAPIKey and MCP config).
	Secrets sandbox.Secrets
	// Policy guards the agent; harnesses map it onto the CLI's own
	// permission settings.
	Policy *sandbox.Policy
	// Scripts are the workspace scripts (policy aliases).
	Scripts map[string]string
	// Session is the agent session of the thread's previous run with this
	// harness, to resume; empty starts fresh.
	Session string
	// Options are harness-specific settings.
	Options map[string]string
	// Approvals are a person's answers to approval requests: approval id
	// (sandbox.ApprovalID) → allowed. A run that needed an approval ends
	// with an approval.requested event; the thread's next run passes the
	// answer here, and the harnesses that ask for approvals resolve their
	// policy with these decisions. Nil answers nothing. Harnesses read it,
	// never write it.
	Approvals map[string]bool
	// AnswerKey authenticates live answers (AnswersFile lines, see
	// ReadAnswers): the runner derives it from the run's record, which the
	// sandbox never holds, so an agent that writes the answers file cannot
	// approve its own requests. Empty: no live answer is accepted.
	AnswerKey []byte
	// Journal is the path of the run's journal inside the sandbox. A
	// harness's helper in the sandbox (the claudecode permission tool)
	// may append whole lines to it, each in one O_APPEND write, while the
	// agent runs, for the translator to read with the agent's own lines.
	// Empty: no such lines.
	Journal string
	// WorkspaceRoot is the real path of the workspace inside the sandbox
	// (the handle's WorkspaceRoot): the cwd a CLI must be told when it takes
	// one.
	WorkspaceRoot string
	// SkillRoots are workspace-relative directories holding the workspace's
	// skills (sandbox.Workspace.SkillRoots); harnesses find the SKILL.md
	// directories under them (FindSkills) and project them into their
	// agent's skill directory for the run.
	SkillRoots []string
	// MCPServers are the workspace's MCP servers as configured: secret
	// references (${secret:NAME}) unexpanded. Harnesses write them into
	// their agent's configuration for the run, secret values through the
	// environment (SecretEnv) or files in RunDir.
	MCPServers []sandbox.MCPServer
	// RunDir is a private directory for this run's files inside the
	// sandbox, outside the workspace (agent configuration that carries a
	// secret, say). It is removed with the run's journal. Write to it with
	// WriteFile.
	RunDir string
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
	// Stdin, when set, is the agent's standard input: written to the process
	// where the provider's stdin is writable, else through a file in the
	// sandbox that is redirected into it.
	Stdin []byte
	// Cleanup lists workspace paths the runner removes after the run (for
	// example configuration that carries a secret).
	Cleanup []string
	// RemoveAfter lists absolute paths inside the sandbox, outside the
	// workspace, that the runner removes after the run: per-run agent state
	// that cannot live in Request.RunDir. It must hold no secret (a process
	// that dies before the run ends cannot remove it).
	RemoveAfter []string
	// DiffGate, when set, is an absolute path inside the sandbox, outside
	// the workspace, that the journal wrapper holds (a file naming its
	// pid) while it records the working tree's starting state beside the
	// agent's start rather than before it (journal.Spec.DiffGate). Only
	// for an agent whose every file change waits while the file exists
	// and the pid it names lives.
	DiffGate string
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
	// end with RUN_FINISHED or RUN_ERROR. Tool calls still open are closed
	// with an interrupted result.
	End(exitCode int) []event.Event
}

// PieceTranslator is a Translator that can take a journal line longer than
// the reader's MaxLine in pieces, as they come (journal.Line.Partial),
// instead of joined: the runner then never holds the whole line. The
// pieces of one line go to Piece, its last piece to Line. A line's
// events must not depend on where it was cut into pieces: the
// concatenated content of the events is what counts (see package run).
// The runner joins the pieces (up to a bound) for a translator without
// this method.
type PieceTranslator interface {
	Translator
	// Piece translates a piece of a line that goes on in the next piece
	// or line.
	Piece(piece []byte) []event.Event
}

// WriteFile writes data to an absolute path inside the sandbox (outside
// the workspace too, unlike the sandbox's FS), creating its directory,
// with the given mode. The data travels on the command's stdin, never in
// argv. Harnesses use it for per-run files in Request.RunDir.
func WriteFile(ctx context.Context, h sandbox.Handle, path string, data []byte, mode string) error {
	if hp, ok := sandbox.HostPath(h, path); ok && hostWrites {
		// The sandbox's files are the host's (the local provider): write
		// with os calls, no process.
		return writeHostFile(hp, path, data, mode)
	}
	res, err := h.Exec(ctx, sandbox.Command{
		Args:  []string{"sh", "-c", `umask 077 && mkdir -p "$(dirname "$1")" && cat > "$1" && chmod "$2" "$1"`, "corral-write", path, mode},
		Stdin: bytes.NewReader(data),
	})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return sandbox.Errorf(sandbox.Internal, "harness.write", path, "writing exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// Sessionless is implemented by harnesses whose agent keeps no session
// between runs (a plain command). The runner then does not look up the
// thread's previous session for Request.Session, which costs a store query
// and a read of the previous run's events at every run start.
type Sessionless interface {
	// Sessionless marks the harness; it does nothing.
	Sessionless()
}

// Warmer is implemented by harnesses that can keep their agent's process
// between a thread's runs (a warm session). A warm process outlives the
// run that started it, so it must not be handed anything that dies with
// that run: the runner then adds no per-run agent tools (run.AgentTools),
// whose token is valid only while its run lives.
type Warmer interface {
	// Warm reports whether a run with these options asks for a warm
	// session; a malformed value is not warm (Prepare refuses it).
	Warm(options map[string]string) bool
}

// Moder is implemented by harnesses whose agent can run in a mode chosen
// per run (Request.Mode).
type Moder interface {
	// CheckMode returns nil when the harness can run its agent in mode,
	// else an InvalidArgument error that names the harness and its modes.
	CheckMode(mode string) error
}

// CheckMode checks a run's mode against h: empty is always fine; a harness
// without modes refuses any (InvalidArgument naming it).
func CheckMode(h Harness, mode string) error {
	if mode == "" {
		return nil
	}
	m, ok := h.(Moder)
	if !ok {
		return sandbox.Errorf(sandbox.InvalidArgument, "harness.mode", h.Name(), "the %s harness has no agent mode (mode %q)", h.Name(), mode)
	}
	return m.CheckMode(mode)
}

// Installer is implemented by harnesses whose agent CLI must be present in
// the sandbox. When the agent cannot be started (exit 127), the run's
// error names the CLI and carries this hint.
type Installer interface {
	// InstallHint says how to put the CLI into a sandbox image.
	InstallHint() string
}

// Requirer is implemented by harnesses that need sandbox capabilities
// beyond exec and a file system. The runner checks them before Prepare and
// fails the run with FailedPrecondition naming what is missing.
type Requirer interface {
	// Requires returns capability flag names (sandbox.CapabilityNames).
	Requires() []string
}

// CheckRequirements returns an error naming the capabilities h needs that
// caps lacks, or nil.
func CheckRequirements(h Harness, caps sandbox.Capabilities) error {
	r, ok := h.(Requirer)
	if !ok {
		return nil
	}
	var missing []string
	for _, c := range r.Requires() {
		if !caps.Has(c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return sandbox.Errorf(sandbox.FailedPrecondition, "harness", h.Name(), "the sandbox lacks %s, which this harness needs", strings.Join(missing, ", "))
	}
	return nil
}
