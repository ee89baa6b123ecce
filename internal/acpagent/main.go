// Command acpagent is a scripted Agent Client Protocol agent for corral's
// tests, built on the agent side of github.com/coder/acp-go-sdk. It speaks
// ACP on its stdin and stdout and, for every prompt, plays one fixed turn
// that exercises what a client must serve:
//
//  1. a thought, a plan and a message that quotes the prompt;
//  2. fs/read_text_file of input.txt in the session's cwd;
//  3. an execute tool call for -cmd: a permission request, then the
//     command through terminal/create, wait_for_exit and release;
//  4. an edit tool call for -write: a permission request, then
//     fs/write_text_file (-no-permission skips both requests);
//  5. a closing message, and the -stop stop reason.
//
// New sessions are "sess-1", "sess-2", ...; with -load the agent can load
// the session "sess-known" (replaying one message of history first).
// -crash exits with code 3 after the first message; -hang blocks the turn
// until it is cancelled (session/cancel), then says "Cancelled by the
// client." and ends the turn cancelled; -hang-on WORD does so only for a
// prompt that contains WORD. -calls FILE notes every initialize,
// session/new, session/load and session/prompt with the agent's pid (the
// warm-session tests count them); -pause FILE holds a turn whose prompt
// contains PAUSE after its first message until FILE exists.
//
// For the containment tests: -launcher starts the agent as a child with
// the same stdio and waits for it, the way an npm launcher does (SIGTERM
// kills the launcher only); -children starts, with every prompt, a
// background child (sleep, in the agent's process group) and a
// double-forked one in a session of its own (setsid), neither waited for;
// -linger keeps the agent alive after its stdin closed. For the cancel
// tests: -cancel-delay ends a cancelled -hang turn only after a while,
// -ignore-cancel never ends it, -exit-gate FILE holds the agent after its
// stdin closed until FILE exists, and -signals FILE notes every
// session/cancel ("cancel"), that hold ("eof") and SIGTERM ("TERM").
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

type config struct {
	load, crash, hang, skipAsk, mcpHTTP bool
	children, linger, ignoreCancel      bool
	cmd, write, stop                    string
	cancelDelay                         time.Duration
	signals, exitGate                   string
	calls, hangOn, pause                string
	models                              []string // offered models; empty: no choice
	modelVia                            string   // "config" (a model config option) or "models" (session/set_model)
}

type agent struct {
	cfg  config
	conn *acp.AgentSideConnection

	mu       sync.Mutex
	n        int
	cwd      map[acp.SessionId]string
	mcp      map[acp.SessionId][]string
	cancels  map[acp.SessionId]context.CancelFunc
	sessions map[acp.SessionId]bool
	model    map[acp.SessionId]string
}

func main() {
	var cfg config
	flag.BoolVar(&cfg.load, "load", false, "advertise loadSession (the session sess-known can be loaded)")
	flag.BoolVar(&cfg.crash, "crash", false, "exit 3 after the first message")
	flag.BoolVar(&cfg.hang, "hang", false, "block the turn until it is cancelled")
	flag.BoolVar(&cfg.skipAsk, "no-permission", false, "run the command and write the file without asking permission first")
	flag.BoolVar(&cfg.mcpHTTP, "mcp-http", false, "advertise MCP over HTTP")
	flag.StringVar(&cfg.cmd, "cmd", "echo hello", "the command the turn runs")
	flag.StringVar(&cfg.write, "write", "notes.txt", "the file the turn writes (relative to the cwd)")
	flag.StringVar(&cfg.stop, "stop", string(acp.StopReasonEndTurn), "the turn's stop reason")
	launcher := flag.Bool("launcher", false, "start the agent as a child and wait for it (like an npm launcher)")
	flag.BoolVar(&cfg.children, "children", false, "start a background and a double-forked child with every prompt")
	flag.BoolVar(&cfg.linger, "linger", false, "keep running after stdin closed")
	flag.BoolVar(&cfg.ignoreCancel, "ignore-cancel", false, "with -hang: go on hanging after session/cancel")
	flag.DurationVar(&cfg.cancelDelay, "cancel-delay", 0, "with -hang: end the cancelled turn only after this long")
	flag.StringVar(&cfg.exitGate, "exit-gate", "", "after stdin closed, note \"eof\" (with -signals) and exit only once this file exists")
	flag.StringVar(&cfg.signals, "signals", "", "append a line to this file for every session/cancel (\"cancel\") and SIGTERM (\"TERM\") received")
	flag.StringVar(&cfg.calls, "calls", "", "append \"METHOD PID\" to this file for every initialize, session/new, session/load and session/prompt")
	flag.StringVar(&cfg.hangOn, "hang-on", "", "block a turn whose prompt contains this word until it is cancelled, as -hang does")
	flag.StringVar(&cfg.pause, "pause", "", "a turn whose prompt contains PAUSE waits after its first message until this file exists")
	models := flag.String("models", "", "offer these models (comma-separated; the first is the default)")
	flag.StringVar(&cfg.modelVia, "model-via", "config", "how models are offered: config (a config option of category model) or models (session/set_model)")
	flag.Parse()
	if *models != "" {
		cfg.models = strings.Split(*models, ",")
	}
	if cfg.signals != "" {
		watchTERM(cfg.signals)
	}
	if *launcher {
		os.Exit(launch())
	}

	a := &agent{cfg: cfg, cwd: map[acp.SessionId]string{}, mcp: map[acp.SessionId][]string{}, model: map[acp.SessionId]string{},
		cancels: map[acp.SessionId]context.CancelFunc{}, sessions: map[acp.SessionId]bool{}}
	a.conn = acp.NewAgentSideConnection(a, os.Stdout, os.Stdin)
	a.conn.SetLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	<-a.conn.Done()
	if cfg.exitGate != "" {
		if cfg.signals != "" {
			note(cfg.signals, "eof")
		}
		for {
			if _, err := os.Stat(cfg.exitGate); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for cfg.linger {
		time.Sleep(time.Hour)
	}
}

// launch runs this program again without -launcher, on the same stdio,
// and exits with its code. It forwards no signal: killing the launcher
// leaves the agent running, as killing an npm launcher does.
func launch() int {
	var args []string
	for _, a := range os.Args[1:] {
		if a != "-launcher" && a != "--launcher" {
			args = append(args, a)
		}
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "acpagent launcher:", err)
		return 1
	}
	return 0
}

// spawnChildren starts a background child in the agent's process group
// and a double-forked one in a session of its own; neither is waited for.
func spawnChildren() {
	bg := exec.Command("sleep", "3600")
	if err := bg.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "acpagent: background child:", err)
	}
	detached := exec.Command("sh", "-c", `setsid sleep 3601 </dev/null >/dev/null 2>&1 &`)
	if err := detached.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "acpagent: detached child:", err)
	}
}

var _ acp.Agent = (*agent)(nil)
var _ acp.AgentLoader = (*agent)(nil)

// noteCall notes a call for -calls.
func (a *agent) noteCall(method string) {
	if a.cfg.calls != "" {
		note(a.cfg.calls, fmt.Sprintf("%s %d", method, os.Getpid()))
	}
}

func (a *agent) Initialize(context.Context, acp.InitializeRequest) (acp.InitializeResponse, error) {
	a.noteCall("initialize")
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentInfo:       &acp.Implementation{Name: "acpagent", Version: "1.0"},
		AgentCapabilities: acp.AgentCapabilities{
			LoadSession:     a.cfg.load,
			McpCapabilities: acp.McpCapabilities{Http: a.cfg.mcpHTTP},
		},
		AuthMethods: []acp.AuthMethod{{Agent: &acp.AuthMethodAgent{Id: "scripted", Name: "Scripted"}}},
	}, nil
}

func (a *agent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func serverNames(servers []acp.McpServer) []string {
	var names []string
	for _, s := range servers {
		switch {
		case s.Http != nil:
			names = append(names, s.Http.Name)
		case s.Sse != nil:
			names = append(names, s.Sse.Name)
		case s.Stdio != nil:
			names = append(names, s.Stdio.Name)
		}
	}
	return names
}

func (a *agent) NewSession(_ context.Context, p acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	a.noteCall("new")
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
	id := acp.SessionId(fmt.Sprintf("sess-%d", a.n))
	a.sessions[id], a.cwd[id], a.mcp[id] = true, p.Cwd, serverNames(p.McpServers)
	if len(a.cfg.models) > 0 {
		a.model[id] = a.cfg.models[0]
	}
	configs, models := a.offer(id)
	return acp.NewSessionResponse{SessionId: id, ConfigOptions: configs, Models: models}, nil
}

func (a *agent) LoadSession(ctx context.Context, p acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	a.noteCall("load")
	if !a.cfg.load || p.SessionId != "sess-known" {
		return acp.LoadSessionResponse{}, acp.NewInvalidParams(map[string]any{"error": "unknown session " + string(p.SessionId)})
	}
	if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: acp.UpdateAgentMessageText("old history")}); err != nil {
		return acp.LoadSessionResponse{}, err
	}
	a.mu.Lock()
	a.sessions[p.SessionId], a.cwd[p.SessionId], a.mcp[p.SessionId] = true, p.Cwd, serverNames(p.McpServers)
	if len(a.cfg.models) > 0 && a.model[p.SessionId] == "" {
		a.model[p.SessionId] = a.cfg.models[0]
	}
	configs, models := a.offer(p.SessionId)
	a.mu.Unlock()
	return acp.LoadSessionResponse{ConfigOptions: configs, Models: models}, nil
}

func (a *agent) Cancel(_ context.Context, p acp.CancelNotification) error {
	if a.cfg.signals != "" {
		note(a.cfg.signals, "cancel")
	}
	if a.cfg.ignoreCancel {
		return nil
	}
	a.mu.Lock()
	cancel := a.cancels[p.SessionId]
	a.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	return nil
}

func (a *agent) Prompt(_ context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	a.noteCall("prompt")
	a.mu.Lock()
	ok, cwd, mcp, model := a.sessions[p.SessionId], a.cwd[p.SessionId], a.mcp[p.SessionId], a.model[p.SessionId]
	ctx, cancel := context.WithCancel(context.Background())
	a.cancels[p.SessionId] = cancel
	a.mu.Unlock()
	defer cancel()
	if !ok {
		return acp.PromptResponse{}, acp.NewInvalidParams(map[string]any{"error": "unknown session"})
	}
	var prompt []string
	for _, b := range p.Prompt {
		if b.Text != nil {
			prompt = append(prompt, b.Text.Text)
		}
	}
	if a.cfg.children {
		spawnChildren()
	}
	t := &turn{a: a, ctx: ctx, sid: p.SessionId, cwd: cwd, model: model}
	if err := t.play(strings.Join(prompt, " "), mcp); err != nil {
		if ctx.Err() != nil {
			_ = a.conn.SessionUpdate(context.Background(), acp.SessionNotification{SessionId: p.SessionId,
				Update: acp.UpdateAgentMessageText(" Cancelled by the client.")})
			return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
		}
		return acp.PromptResponse{}, err
	}
	return acp.PromptResponse{StopReason: acp.StopReason(a.cfg.stop)}, nil
}

type turn struct {
	a     *agent
	ctx   context.Context
	sid   acp.SessionId
	cwd   string
	model string // the session's model, where models are offered
}

func (t *turn) send(u acp.SessionUpdate) error {
	return t.a.conn.SessionUpdate(t.ctx, acp.SessionNotification{SessionId: t.sid, Update: u})
}

func (t *turn) ask(id acp.ToolCallId, title string, kind acp.ToolKind, input map[string]any) (bool, error) {
	resp, err := t.a.conn.RequestPermission(t.ctx, acp.RequestPermissionRequest{
		SessionId: t.sid,
		ToolCall:  acp.ToolCallUpdate{ToolCallId: id, Title: acp.Ptr(title), Kind: acp.Ptr(kind), RawInput: input},
		Options: []acp.PermissionOption{
			{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "allow"},
			{Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: "reject"},
		},
	})
	if err != nil {
		return false, err
	}
	return resp.Outcome.Selected != nil && resp.Outcome.Selected.OptionId == "allow", nil
}

func (t *turn) fail(id acp.ToolCallId, text string) error {
	return t.send(acp.UpdateToolCall(id, acp.WithUpdateStatus(acp.ToolCallStatusFailed),
		acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock(text))})))
}

func (t *turn) play(prompt string, mcp []string) error {
	if err := t.send(acp.UpdateAgentThoughtText("Planning the work.")); err != nil {
		return err
	}
	if err := t.send(acp.UpdatePlan(
		acp.PlanEntry{Content: "run the command", Priority: acp.PlanEntryPriorityHigh, Status: acp.PlanEntryStatusPending},
		acp.PlanEntry{Content: "write the notes", Priority: acp.PlanEntryPriorityMedium, Status: acp.PlanEntryStatusPending},
	)); err != nil {
		return err
	}
	msg := "Working on: " + prompt
	if len(mcp) > 0 {
		msg += " (mcp: " + strings.Join(mcp, ",") + ")"
	}
	if t.model != "" {
		msg += " (model: " + t.model + ")"
	}
	if err := t.send(acp.UpdateAgentMessageText(msg)); err != nil {
		return err
	}
	if t.a.cfg.crash {
		os.Exit(3)
	}
	for t.a.cfg.pause != "" && strings.Contains(prompt, "PAUSE") {
		if _, err := os.Stat(t.a.cfg.pause); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if t.a.cfg.hang || (t.a.cfg.hangOn != "" && strings.Contains(prompt, t.a.cfg.hangOn)) {
		<-t.ctx.Done()
		time.Sleep(t.a.cfg.cancelDelay)
		return t.ctx.Err()
	}
	in, err := t.a.conn.ReadTextFile(t.ctx, acp.ReadTextFileRequest{SessionId: t.sid, Path: filepath.Join(t.cwd, "input.txt")})
	note := " input.txt: " + strings.TrimSpace(in.Content)
	if err != nil {
		note = " (no input.txt)"
	}
	if err := t.send(acp.UpdateAgentMessageText(note)); err != nil {
		return err
	}

	// The command, through a terminal.
	run := acp.ToolCallId("call-1")
	input := map[string]any{"command": t.a.cfg.cmd}
	if err := t.send(acp.StartToolCall(run, "Run "+t.a.cfg.cmd, acp.WithStartKind(acp.ToolKindExecute),
		acp.WithStartStatus(acp.ToolCallStatusPending), acp.WithStartRawInput(input))); err != nil {
		return err
	}
	allowed := true
	if !t.a.cfg.skipAsk {
		if allowed, err = t.ask(run, "Run "+t.a.cfg.cmd, acp.ToolKindExecute, input); err != nil {
			return err
		}
	}
	if !allowed {
		if err := t.fail(run, "permission denied"); err != nil {
			return err
		}
	} else if err := t.runCommand(run); err != nil {
		return err
	}

	// The file, through the client's file system.
	write := acp.ToolCallId("call-2")
	target := filepath.Join(t.cwd, t.a.cfg.write)
	content := "hello from acp\n"
	winput := map[string]any{"path": target, "content": content}
	if err := t.send(acp.StartToolCall(write, "Write "+t.a.cfg.write, acp.WithStartKind(acp.ToolKindEdit),
		acp.WithStartStatus(acp.ToolCallStatusPending), acp.WithStartLocations([]acp.ToolCallLocation{{Path: target}}),
		acp.WithStartRawInput(winput))); err != nil {
		return err
	}
	allowed = true
	if !t.a.cfg.skipAsk {
		if allowed, err = t.ask(write, "Write "+t.a.cfg.write, acp.ToolKindEdit, winput); err != nil {
			return err
		}
	}
	switch {
	case !allowed:
		err = t.fail(write, "permission denied")
	default:
		if _, werr := t.a.conn.WriteTextFile(t.ctx, acp.WriteTextFileRequest{SessionId: t.sid, Path: target, Content: content}); werr != nil {
			err = t.fail(write, "write failed: "+werr.Error())
		} else {
			err = t.send(acp.UpdateToolCall(write, acp.WithUpdateStatus(acp.ToolCallStatusCompleted),
				acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolContent(acp.TextBlock("wrote " + t.a.cfg.write))})))
		}
	}
	if err != nil {
		return err
	}
	return t.send(acp.UpdateAgentMessageText("Done."))
}

func (t *turn) runCommand(id acp.ToolCallId) error {
	if err := t.send(acp.UpdateToolCall(id, acp.WithUpdateStatus(acp.ToolCallStatusInProgress))); err != nil {
		return err
	}
	term, err := t.a.conn.CreateTerminal(t.ctx, acp.CreateTerminalRequest{SessionId: t.sid, Command: "sh", Args: []string{"-c", t.a.cfg.cmd}, Cwd: acp.Ptr(t.cwd)})
	if err != nil {
		return t.fail(id, "terminal failed: "+err.Error())
	}
	if _, err := t.a.conn.WaitForTerminalExit(t.ctx, acp.WaitForTerminalExitRequest{SessionId: t.sid, TerminalId: term.TerminalId}); err != nil {
		return err
	}
	if _, err := t.a.conn.TerminalOutput(t.ctx, acp.TerminalOutputRequest{SessionId: t.sid, TerminalId: term.TerminalId}); err != nil {
		return err
	}
	if err := t.send(acp.UpdateToolCall(id, acp.WithUpdateStatus(acp.ToolCallStatusCompleted),
		acp.WithUpdateContent([]acp.ToolCallContent{acp.ToolTerminalRef(term.TerminalId)}))); err != nil {
		return err
	}
	_, err = t.a.conn.ReleaseTerminal(t.ctx, acp.ReleaseTerminalRequest{SessionId: t.sid, TerminalId: term.TerminalId})
	return err
}

// The rest of acp.Agent is not part of the script.

func (a *agent) CloseSession(context.Context, acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionClose)
}

func (a *agent) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

func (a *agent) ResumeSession(context.Context, acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
}

func (a *agent) SetSessionConfigOption(_ context.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	if a.cfg.modelVia != "config" || len(a.cfg.models) == 0 {
		return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
	}
	if p.ValueId == nil || p.ValueId.ConfigId != "model" || !slices.Contains(a.cfg.models, string(p.ValueId.Value)) {
		return acp.SetSessionConfigOptionResponse{}, acp.NewInvalidParams(map[string]any{"error": "no such option or value"})
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.model[p.ValueId.SessionId] = string(p.ValueId.Value)
	configs, _ := a.offer(p.ValueId.SessionId)
	return acp.SetSessionConfigOptionResponse{ConfigOptions: configs}, nil
}

// UnstableSetSessionModel is ACP's session/set_model.
func (a *agent) UnstableSetSessionModel(_ context.Context, p acp.UnstableSetSessionModelRequest) (acp.UnstableSetSessionModelResponse, error) {
	if a.cfg.modelVia != "models" || !slices.Contains(a.cfg.models, string(p.ModelId)) {
		return acp.UnstableSetSessionModelResponse{}, acp.NewInvalidParams(map[string]any{"error": "no such model"})
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.model[p.SessionId] = string(p.ModelId)
	return acp.UnstableSetSessionModelResponse{}, nil
}

// offer is how the session offers its models (a.mu held): a config option
// of category model, or the models list, or nothing.
func (a *agent) offer(id acp.SessionId) ([]acp.SessionConfigOption, *acp.SessionModelState) {
	if len(a.cfg.models) == 0 {
		return nil, nil
	}
	if a.cfg.modelVia == "models" {
		var ms []acp.ModelInfo
		for _, m := range a.cfg.models {
			ms = append(ms, acp.ModelInfo{ModelId: acp.ModelId(m), Name: m})
		}
		return nil, &acp.SessionModelState{AvailableModels: ms, CurrentModelId: acp.ModelId(a.model[id])}
	}
	var opts acp.SessionConfigSelectOptionsUngrouped
	for _, m := range a.cfg.models {
		opts = append(opts, acp.SessionConfigSelectOption{Name: m, Value: acp.SessionConfigValueId(m)})
	}
	cat := acp.SessionConfigOptionCategoryModel
	return []acp.SessionConfigOption{{Select: &acp.SessionConfigOptionSelect{Id: "model", Name: "Model", Category: &cat, Type: "select",
		CurrentValue: acp.SessionConfigValueId(a.model[id]), Options: acp.SessionConfigSelectOptions{Ungrouped: &opts}}}}, nil
}

func (a *agent) SetSessionMode(context.Context, acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, nil
}

// note appends a line to the file at path.
func note(path, line string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	_, _ = f.WriteString(line + "\n")
	_ = f.Close()
}

// watchTERM notes a SIGTERM in path and exits as the signal would.
func watchTERM(path string) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	go func() {
		<-ch
		note(path, "TERM")
		os.Exit(143)
	}()
}
