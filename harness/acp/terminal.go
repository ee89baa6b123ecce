package acp

import (
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/d10ffeed/corral/sandbox"
)

// defaultOutputLimit bounds a terminal's kept output when the agent gives
// no limit; journalOutputLimit bounds what a terminal_exit record carries.
const (
	defaultOutputLimit = 1 << 20
	journalOutputLimit = 64 << 10
)

// terminal is a command the agent runs through terminal/create: spawned in
// the sandbox, its stdout and stderr kept together, bounded from the
// front.
type terminal struct {
	id    string
	proc  sandbox.Process
	limit int

	mu        sync.Mutex
	buf       []byte
	truncated bool

	copied chan struct{} // closed when both streams are drained
	done   chan struct{} // closed once the exit is known (and journaled)
	code   int
}

func (t *terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.limit {
		cut := len(t.buf) - t.limit
		for cut < len(t.buf) && !utf8.RuneStart(t.buf[cut]) {
			cut++
		}
		t.buf = append(t.buf[:0:0], t.buf[cut:]...)
		t.truncated = true
	}
	return len(p), nil
}

// output returns the kept output, at most limit bytes of its tail.
func (t *terminal) output(limit int) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b, cut := t.buf, t.truncated
	if limit > 0 && len(b) > limit {
		i := len(b) - limit
		for i < len(b) && !utf8.RuneStart(b[i]) {
			i++
		}
		b, cut = b[i:], true
	}
	return string(b), cut
}

func (t *terminal) exited() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// terminals are a session's terminals by id.
type terminals struct {
	mu   sync.Mutex
	next int
	m    map[string]*terminal
}

// start spawns cmd and begins collecting its output. onExit runs once the
// command exited and its output was drained (or a second passed, for a
// backgrounded child that keeps the streams open), before the exit is
// visible to wait_for_exit.
func (ts *terminals) start(ctx context.Context, h sandbox.Handle, cmd sandbox.Command, limit int, onExit func(*terminal)) (*terminal, error) {
	if limit <= 0 {
		limit = defaultOutputLimit
	}
	proc, err := h.Spawn(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if c, ok := proc.Stdin().(io.Closer); ok {
		_ = c.Close()
	}
	ts.mu.Lock()
	if ts.m == nil {
		ts.m = map[string]*terminal{}
	}
	ts.next++
	t := &terminal{id: "term-" + strconv.Itoa(ts.next), proc: proc, limit: limit, copied: make(chan struct{}), done: make(chan struct{})}
	ts.m[t.id] = t
	ts.mu.Unlock()

	var wg sync.WaitGroup
	for _, r := range []io.Reader{proc.Stdout(), proc.Stderr()} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = io.Copy(t, r)
		}()
	}
	go func() {
		wg.Wait()
		close(t.copied)
	}()
	go func() {
		code, err := proc.Wait(context.WithoutCancel(ctx))
		if err != nil {
			code = -1
		}
		select {
		case <-t.copied:
		case <-time.After(time.Second):
		}
		t.code = code
		if onExit != nil {
			onExit(t)
		}
		close(t.done)
	}()
	return t, nil
}

func (ts *terminals) get(id string) (*terminal, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.m[id]
	return t, ok
}

func (ts *terminals) remove(id string) (*terminal, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t, ok := ts.m[id]
	delete(ts.m, id)
	return t, ok
}

// killAll kills every terminal still running and forgets them all.
func (ts *terminals) killAll(ctx context.Context) {
	ts.mu.Lock()
	all := ts.m
	ts.m = nil
	ts.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range all {
		if t.exited() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = t.proc.Kill(ctx, 0)
		}()
	}
	wg.Wait()
}

// shellMeta are the characters that make a terminal command line need a
// shell.
const shellMeta = " \t\n|&;<>()$`\\\"'*?[]#~=%"

// CreateTerminal serves terminal/create: the command runs in the sandbox,
// gated by the policy's command rules.
func (s *session) CreateTerminal(_ context.Context, p acpsdk.CreateTerminalRequest) (acpsdk.CreateTerminalResponse, error) {
	if p.Command == "" {
		return acpsdk.CreateTerminalResponse{}, sandbox.Errorf(sandbox.InvalidArgument, "harness.acp", "terminal", "empty command")
	}
	var cmd sandbox.Command
	text := commandLine(p.Command, p.Args)
	switch {
	case len(p.Args) > 0:
		cmd.Args = append([]string{p.Command}, p.Args...)
	case strings.ContainsAny(p.Command, shellMeta):
		cmd.Shell = p.Command
	default:
		cmd.Args = []string{p.Command}
	}
	if p.Cwd != nil && *p.Cwd != "" {
		rel, err := workspaceRel(*p.Cwd, s.req.WorkspaceRoot)
		if err != nil {
			return acpsdk.CreateTerminalResponse{}, err
		}
		cmd.Dir = sandbox.PortablePath(rel)
	}
	if len(p.Env) > 0 {
		cmd.Env = map[string]string{}
		for _, e := range p.Env {
			cmd.Env[e.Name] = e.Value
		}
	}
	if err := cmd.Validate(); err != nil {
		return acpsdk.CreateTerminalResponse{}, err
	}
	res := s.resolve(sandbox.ApproveCommand, text)
	rec := record{Kind: recTerminal, Gate: string(sandbox.ApproveCommand), Target: text, Title: "Run " + text, Command: text,
		Decision: decision(res), ApprovalID: res.ID, NeedsApproval: res.NeedsApproval, Off: s.off.Load()}
	if res.Decision != sandbox.Allow {
		_ = s.jw.write(rec)
		return acpsdk.CreateTerminalResponse{}, denied(res, "running "+text)
	}
	limit := 0
	if p.OutputByteLimit != nil {
		limit = *p.OutputByteLimit
	}
	t, err := s.terms.start(s.helpers, s.hd, cmd, limit, func(t *terminal) {
		out, cut := t.output(journalOutputLimit)
		code := t.code
		_ = s.jw.write(record{Kind: recTerminalExit, TerminalID: t.id, Command: text, Output: out, Truncated: cut, ExitCode: &code})
	})
	if err != nil {
		return acpsdk.CreateTerminalResponse{}, err
	}
	rec.TerminalID = t.id
	_ = s.jw.write(rec)
	return acpsdk.CreateTerminalResponse{TerminalId: t.id}, nil
}

func (s *session) terminal(id string) (*terminal, error) {
	t, ok := s.terms.get(id)
	if !ok {
		return nil, sandbox.Errorf(sandbox.NotFound, "harness.acp", id, "no such terminal")
	}
	return t, nil
}

func exitStatus(t *terminal) *acpsdk.TerminalExitStatus {
	if !t.exited() {
		return nil
	}
	code := t.code
	return &acpsdk.TerminalExitStatus{ExitCode: &code}
}

// TerminalOutput serves terminal/output.
func (s *session) TerminalOutput(_ context.Context, p acpsdk.TerminalOutputRequest) (acpsdk.TerminalOutputResponse, error) {
	t, err := s.terminal(p.TerminalId)
	if err != nil {
		return acpsdk.TerminalOutputResponse{}, err
	}
	st := exitStatus(t)
	out, cut := t.output(0)
	return acpsdk.TerminalOutputResponse{Output: out, Truncated: cut, ExitStatus: st}, nil
}

// WaitForTerminalExit serves terminal/wait_for_exit.
func (s *session) WaitForTerminalExit(ctx context.Context, p acpsdk.WaitForTerminalExitRequest) (acpsdk.WaitForTerminalExitResponse, error) {
	t, err := s.terminal(p.TerminalId)
	if err != nil {
		return acpsdk.WaitForTerminalExitResponse{}, err
	}
	select {
	case <-t.done:
	case <-ctx.Done():
		return acpsdk.WaitForTerminalExitResponse{}, ctx.Err()
	}
	code := t.code
	return acpsdk.WaitForTerminalExitResponse{ExitCode: &code}, nil
}

// KillTerminal serves terminal/kill: the command dies, the terminal stays.
func (s *session) KillTerminal(ctx context.Context, p acpsdk.KillTerminalRequest) (acpsdk.KillTerminalResponse, error) {
	t, err := s.terminal(p.TerminalId)
	if err != nil {
		return acpsdk.KillTerminalResponse{}, err
	}
	if err := t.proc.Kill(ctx, 0); err != nil {
		return acpsdk.KillTerminalResponse{}, err
	}
	return acpsdk.KillTerminalResponse{}, nil
}

// ReleaseTerminal serves terminal/release: the command dies if it still
// runs, and the terminal is forgotten.
func (s *session) ReleaseTerminal(ctx context.Context, p acpsdk.ReleaseTerminalRequest) (acpsdk.ReleaseTerminalResponse, error) {
	t, ok := s.terms.remove(p.TerminalId)
	if !ok {
		return acpsdk.ReleaseTerminalResponse{}, sandbox.Errorf(sandbox.NotFound, "harness.acp", p.TerminalId, "no such terminal")
	}
	if !t.exited() {
		if err := t.proc.Kill(ctx, 0); err != nil {
			return acpsdk.ReleaseTerminalResponse{}, err
		}
	}
	return acpsdk.ReleaseTerminalResponse{}, nil
}
