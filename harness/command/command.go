// Package command is the harness for any program: each line it prints
// becomes text, and a non-zero exit becomes a run error.
package command

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"unicode/utf8"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// Name is the harness's name.
const Name = "command"

// Harness runs Request.Args (or, without Args, the prompt as a shell
// script).
type Harness struct{}

var _ harness.Harness = Harness{}

// Name returns "command".
func (Harness) Name() string { return Name }

// Sessionless marks a command as keeping no agent session between runs
// (harness.Sessionless).
func (Harness) Sessionless() {}

// MCPConfigEnv names the variable that holds the path of the run's MCP
// configuration file, when the run has MCP servers: RunDir/mcp.json (mode
// 600), {"mcpServers": …} in Claude Code's shape (harness.MCPConfig). A
// value that names a secret is a ${NAME} reference to another variable of
// the program's environment; the file holds no secret value.
const MCPConfigEnv = "CORRAL_MCP_CONFIG"

// Prepare returns the command to run, after writing the run's MCP servers
// into the file MCPConfigEnv names.
func (Harness) Prepare(ctx context.Context, h sandbox.Handle, req harness.Request) (harness.Invocation, error) {
	env, err := projectMCP(ctx, h, req)
	if err != nil {
		return harness.Invocation{}, err
	}
	cmd := sandbox.Command{Args: req.Args, Env: env}
	if len(req.Args) == 0 {
		if req.Prompt == "" {
			return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, "harness.command", req.RunID, "nothing to run: give a command")
		}
		cmd = sandbox.Command{Shell: req.Prompt, Env: env}
	}
	if err := cmd.Validate(); err != nil {
		return harness.Invocation{}, err
	}
	return harness.Invocation{Command: cmd}, nil
}

// projectMCP writes the run's MCP servers for the program and returns its
// environment: the request's, with MCPConfigEnv and the secret-bearing
// values the file references. Without servers (or a run directory) it is
// the request's environment unchanged.
func projectMCP(ctx context.Context, h sandbox.Handle, req harness.Request) (map[string]string, error) {
	if len(req.MCPServers) == 0 || req.RunDir == "" {
		return req.Env, nil
	}
	if err := sandbox.ValidateMCPServers(req.MCPServers, req.Secrets); err != nil {
		return nil, err
	}
	se := harness.NewSecretEnv(req.Secrets)
	servers, err := harness.MCPConfig(req.MCPServers, se)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(map[string]any{"mcpServers": servers})
	if err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, "harness.command", req.RunID, err)
	}
	file := path.Join(req.RunDir, "mcp.json")
	if err := harness.WriteFile(ctx, h, file, data, "600"); err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, "harness.command", file, err)
	}
	env := maps.Clone(req.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, se.Env)
	env[MCPConfigEnv] = file
	return env, nil
}

// Translator returns the line-per-text translator. It takes long lines in
// pieces (harness.PieceTranslator): each piece becomes a text delta, with
// no newline between the pieces of one line.
func (Harness) Translator(run harness.Run) harness.Translator {
	return &translator{run: run, ids: event.IDs{RunID: run.RunID}}
}

type translator struct {
	run   harness.Run
	ids   event.IDs
	msgID string
	// hold is an incomplete UTF-8 sequence that ended the last piece: it
	// goes with the next piece, so a character cut between two pieces
	// arrives whole.
	hold []byte
}

var _ harness.PieceTranslator = (*translator)(nil)

func (t *translator) Begin() []event.Event {
	return []event.Event{{Type: event.RunStarted, ThreadID: t.run.ThreadID, RunID: t.run.RunID}}
}

func (t *translator) open() []event.Event {
	if t.msgID != "" {
		return nil
	}
	t.msgID = t.ids.Next("msg")
	return []event.Event{{Type: event.TextMessageStart, MessageID: t.msgID, Role: "assistant"}}
}

func (t *translator) Line(line []byte) []event.Event {
	out := t.open()
	text := string(t.hold) + string(line) + "\n"
	t.hold = nil
	return append(out, event.Event{Type: event.TextMessageContent, MessageID: t.msgID, Delta: text})
}

func (t *translator) Piece(piece []byte) []event.Event {
	out := t.open()
	b := append(t.hold, piece...)
	n := completeUTF8(b)
	t.hold = append([]byte(nil), b[n:]...)
	if n == 0 {
		return out
	}
	return append(out, event.Event{Type: event.TextMessageContent, MessageID: t.msgID, Delta: string(b[:n])})
}

// completeUTF8 returns the length of b without a trailing incomplete UTF-8
// sequence (one that more bytes could still complete).
func completeUTF8(b []byte) int {
	for k := 1; k <= utf8.UTFMax-1 && k <= len(b); k++ {
		c := b[len(b)-k]
		if c < utf8.RuneSelf {
			return len(b) // ASCII: nothing pending
		}
		if utf8.RuneStart(c) {
			if utf8.FullRune(b[len(b)-k:]) {
				return len(b)
			}
			return len(b) - k
		}
	}
	return len(b)
}

func (t *translator) End(code int) []event.Event {
	var out []event.Event
	if len(t.hold) > 0 { // the journal ended inside a line's pieces
		out = append(out, t.open()...)
		out = append(out, event.Event{Type: event.TextMessageContent, MessageID: t.msgID, Delta: string(t.hold)})
		t.hold = nil
	}
	if t.msgID != "" {
		out = append(out, event.Event{Type: event.TextMessageEnd, MessageID: t.msgID})
		t.msgID = ""
	}
	c := code
	if code != 0 {
		return append(out, event.Event{Type: event.RunError, ThreadID: t.run.ThreadID, RunID: t.run.RunID,
			Message: fmt.Sprintf("the command exited with code %d", code), Code: "exit", ExitCode: &c})
	}
	return append(out, event.Event{Type: event.RunFinished, ThreadID: t.run.ThreadID, RunID: t.run.RunID, ExitCode: &c})
}

// UnenforcedRules reports every rule of the policy that denies or asks:
// the command harness runs a program as given, and corral sees none of its
// actions (a network deny holds where the sandbox's provider cuts the
// network).
func (Harness) UnenforcedRules(req harness.Request) []event.UnenforcedRule {
	return harness.Claims(req.Policy, func(event.UnenforcedRule) string {
		return "the command harness runs a program as given: corral sees none of its actions"
	})
}
