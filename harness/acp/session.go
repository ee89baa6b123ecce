package acp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// clientVersion is what corral tells agents it is.
const clientVersion = "0.1"

// session is the ACP client of one run: the agent's stdin and stdout
// reached through two helper processes on the relay's FIFOs, the journal
// through a third.
type session struct {
	h              *Harness
	hd             sandbox.Handle
	req            harness.Request
	ctx            context.Context // ends when the harness closes
	cancel         context.CancelFunc
	decMu          sync.Mutex
	decisions      map[string]bool // approval answers: Request.Approvals, then live ones
	mcp            []sandbox.MCPServer
	startTimeout   time.Duration
	approvalWait   time.Duration // how long an ask waits for a live answer; 0: not at all
	refusedAnswers int           // unauthenticated lines of the answers file warned about
	log            *slog.Logger

	helpers    context.Context // the helpers' and terminals' life: until teardown ends
	endHelpers context.CancelFunc
	in, out    sandbox.Process // cat > in (the agent's stdin), outScript (its stdout, from its log)
	ev         sandbox.Process // cat > ev (the journal)
	input      *agentInput
	off        atomic.Int64 // the offset in the agent's output log past the last line the tee handled
	jw         *journalWriter
	// A session taken over from a client that went away (Reattach): the
	// prompt's JSON-RPC id, and its answer when the tee sees it.
	promptID   string
	promptResp chan []byte
	conn       *acpsdk.ClientSideConnection
	terms      terminals
	loading    atomic.Bool  // session/load is replaying history: journal none of it
	sid        atomic.Value // the acpsdk.SessionId the prompt runs in, once known
	stopped    acpsdk.StopReason
	turnDone   chan struct{} // closed when the turn (or its start) ended, before teardown
	cancelling chan struct{} // closed when the client sent session/cancel
	cancelOnce sync.Once
	done       chan struct{}
	abandoned  atomic.Bool // the client vanished without a word (tests: a host that dies)
	// A warm turn (option warm=true): the thread's kept agent, and the
	// offset this client adds to its JSON-RPC request ids.
	warm   *warmState
	idBase uint64
}

var _ acpsdk.Client = (*session)(nil)

// spawn starts the helper processes and the connection; the agent's
// output is read from byte offset off of its log.
func (s *session) spawn(off int64) error {
	s.done, s.turnDone, s.cancelling = make(chan struct{}), make(chan struct{}), make(chan struct{})
	s.helpers, s.endHelpers = context.WithCancel(context.Background())
	dir := s.req.RunDir
	var err error
	start := func(name, script string, args ...string) sandbox.Process {
		if err != nil {
			return nil
		}
		var p sandbox.Process
		p, err = s.hd.Spawn(s.helpers, sandbox.Command{Args: append([]string{"sh", "-c", script, "corral-acp-" + name}, args...)})
		return p
	}
	if s.warm != nil {
		s.in = start("in", inScript, path.Join(s.warm.dir, "in"))
		s.out = start("out", warmOutScript, s.warm.dir, s.warm.pid, strconv.FormatInt(off, 10))
	} else {
		s.in = start("in", inScript, path.Join(dir, "in"))
		s.out = start("out", outScript, dir, strconv.FormatInt(off, 10))
	}
	s.ev = start("ev", evScript, path.Join(dir, "ev"))
	if err != nil {
		s.killHelpers()
		return err
	}
	closeStreams(s.in.Stdout(), s.in.Stderr(), s.ev.Stdout(), s.ev.Stderr(), s.out.Stderr())
	if c, ok := s.out.Stdin().(io.Closer); ok {
		_ = c.Close()
	}
	s.jw = &journalWriter{w: s.ev.Stdin(), secrets: s.req.Secrets}
	s.off.Store(off)
	pr, pw := io.Pipe()
	s.input = &agentInput{w: s.in.Stdin(), s: s}
	s.conn = acpsdk.NewClientSideConnection(s, s.input, pr)
	s.conn.SetLogger(s.log)
	// Only now: the connection reads its logger when its input ends,
	// which must not race SetLogger.
	go s.tee(s.out.Stdout(), pw)
	return nil
}

// agentInput is the agent's stdin: the connection's messages and the raw
// answers of a client that took the session over, one whole message per
// write. A session/prompt request is journaled (its JSON-RPC id) before
// the agent gets it, so that a client that takes the session over knows
// the prompt's answer when it sees it.
type agentInput struct {
	mu   sync.Mutex
	w    io.Writer
	s    *session
	dead atomic.Bool // tests: the process died, nothing more reaches the agent
}

func (a *agentInput) Write(b []byte) (int, error) {
	if a.dead.Load() {
		return 0, io.ErrClosedPipe
	}
	if a.s.idBase != 0 {
		b = rewriteID(b, a.s.idBase)
	}
	if bytes.Contains(b, []byte(`"`+acpsdk.AgentMethodSessionPrompt+`"`)) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(b, &m) == nil && m.Method == acpsdk.AgentMethodSessionPrompt && len(m.ID) > 0 {
			_ = a.s.jw.write(record{Kind: recRPC, Method: m.Method, RPCID: m.ID, Off: a.s.off.Load()})
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.w.Write(b)
}

func (s *session) killHelpers() {
	s.endHelpers()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range []sandbox.Process{s.in, s.out, s.ev} {
		if p != nil {
			_ = p.Kill(ctx, 0)
		}
	}
}

// tee passes the agent's stdout to the connection line by line, and
// journals each session/update notification before the connection sees
// it, so the journal keeps the agent's order (requests such as permission
// asks are journaled by their handlers, which run after the line that
// carried them). While session/load replays history nothing is journaled;
// the load's answer ends the replay.
func (s *session) tee(r io.Reader, w *io.PipeWriter) {
	br := bufio.NewReaderSize(r, 64<<10)
	off := s.off.Load()
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			off += int64(len(line))
			s.journalLine(line, off)
			s.off.Store(off)
			if s.idBase != 0 {
				line = unshiftID(line, s.idBase)
			}
			if _, werr := w.Write(line); werr != nil {
				_ = w.CloseWithError(werr)
				return
			}
		}
		if err != nil {
			_ = w.Close()
			return
		}
	}
}

func (s *session) journalLine(line []byte, off int64) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(line, &m) != nil {
		return
	}
	if s.loading.Load() {
		if len(m.ID) > 0 && m.Method == "" {
			s.loading.Store(false) // the answer to session/load
		}
		return
	}
	switch {
	case m.Method == acpsdk.ClientMethodSessionUpdate && len(m.Params) > 0:
		_ = s.jw.write(record{Kind: recUpdate, Params: m.Params, Off: off})
	case m.Method == acpsdk.ClientMethodSessionRequestPermission && len(m.ID) > 0:
		_ = s.jw.write(record{Kind: recRPC, Method: m.Method, RPCID: m.ID, Params: m.Params, Off: off})
	case m.Method == "" && s.promptID != "" && string(bytes.TrimSpace(m.ID)) == s.promptID:
		select {
		case s.promptResp <- append([]byte(nil), line...):
		default:
		}
	}
}

// run drives the session to the end of the turn and tears it down.
func (s *session) run() {
	defer close(s.done)
	failed := s.drive()
	close(s.turnDone)
	s.teardown(failed)
}

func (s *session) drive() *record {
	var sid acpsdk.SessionId
	if s.warm != nil && s.warm.found {
		// The kept agent holds the session already: the prompt is all.
		sid = acpsdk.SessionId(s.req.Session)
		_ = s.jw.write(record{Kind: recSession, SessionID: string(sid), Resumed: true, Mode: s.req.Mode, Warm: warmKept})
		s.sid.Store(sid)
	} else {
		var failed *record
		if sid, failed = s.open(); failed != nil {
			return failed
		}
		if s.warm != nil {
			s.rememberSession(s.ctx, string(sid))
		}
	}
	resp, err := s.conn.Prompt(s.ctx, acpsdk.PromptRequest{SessionId: sid, Prompt: []acpsdk.ContentBlock{acpsdk.TextBlock(s.req.Prompt)}})
	if err != nil {
		return s.failure("session/prompt", err)
	}
	var usage json.RawMessage
	if resp.Usage != nil {
		usage, _ = json.Marshal(resp.Usage)
	}
	_ = s.jw.write(record{Kind: recPrompt, StopReason: string(resp.StopReason), Usage: usage})
	s.stopped = resp.StopReason
	return nil
}

// open initializes the agent and opens the run's session: loaded, or new.
func (s *session) open() (acpsdk.SessionId, *record) {
	initCtx, cancel := context.WithTimeout(s.ctx, s.startTimeout)
	init, err := s.conn.Initialize(initCtx, acpsdk.InitializeRequest{
		ProtocolVersion: acpsdk.ProtocolVersionNumber,
		ClientInfo:      &acpsdk.Implementation{Name: "corral", Version: clientVersion},
		ClientCapabilities: acpsdk.ClientCapabilities{
			Fs:       acpsdk.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true},
			Terminal: true,
		},
	})
	timedOut := initCtx.Err() != nil && s.ctx.Err() == nil
	cancel()
	if err != nil {
		if timedOut {
			return "", &record{Kind: recError, Code: "acp-start-timeout",
				Message: fmt.Sprintf("the ACP agent did not answer initialize within %s", s.startTimeout)}
		}
		return "", s.failure("initialize", err)
	}
	if int(init.ProtocolVersion) > acpsdk.ProtocolVersionNumber {
		return "", &record{Kind: recError, Code: "acp-protocol",
			Message: fmt.Sprintf("the agent speaks ACP version %d; corral speaks %d", init.ProtocolVersion, acpsdk.ProtocolVersionNumber)}
	}
	agent := ""
	if init.AgentInfo != nil {
		agent = strings.TrimSpace(init.AgentInfo.Name + " " + init.AgentInfo.Version)
	}
	caps := init.AgentCapabilities
	_ = s.jw.write(record{Kind: recInit, Agent: agent, ProtocolVersion: int(init.ProtocolVersion), LoadSession: caps.LoadSession})

	if method := s.req.Options[OptionAuthMethod]; method != "" {
		var ids []string
		for _, m := range init.AuthMethods {
			switch {
			case m.Agent != nil:
				ids = append(ids, m.Agent.Id)
			case m.EnvVar != nil:
				ids = append(ids, m.EnvVar.Id)
			case m.Terminal != nil:
				ids = append(ids, m.Terminal.Id)
			}
		}
		found := false
		for _, id := range ids {
			found = found || id == method
		}
		if !found {
			return "", &record{Kind: recError, Code: "acp-auth",
				Message: fmt.Sprintf("the agent does not offer the authentication method %q (it offers: %s)", method, strings.Join(ids, ", "))}
		}
		if _, err := s.conn.Authenticate(s.ctx, acpsdk.AuthenticateRequest{MethodId: method}); err != nil {
			return "", s.failure("authenticate", err)
		}
	}

	servers, skipped := acpServers(s.mcp, caps.McpCapabilities)
	if len(skipped) > 0 {
		_ = s.jw.write(record{Kind: recWarning, Message: "the agent does not support the transport of these MCP servers, left out: " + strings.Join(skipped, ", ")})
	}
	cwd := s.req.WorkspaceRoot
	var sid acpsdk.SessionId
	var configs []acpsdk.SessionConfigOption
	var models *acpsdk.SessionModelState
	rec := record{Kind: recSession}
	if prev := s.req.Session; prev != "" {
		if caps.LoadSession {
			s.loading.Store(true)
			loaded, err := s.conn.LoadSession(s.ctx, acpsdk.LoadSessionRequest{SessionId: acpsdk.SessionId(prev), Cwd: cwd, McpServers: servers})
			s.loading.Store(false)
			switch {
			case err == nil:
				sid, rec.Resumed = acpsdk.SessionId(prev), true
				configs, models = loaded.ConfigOptions, loaded.Models
			case s.ctx.Err() != nil || s.agentGone():
				return "", s.failure("session/load", err)
			default:
				rec.Reason = "session/load failed: " + errText(err)
			}
		} else {
			rec.Reason = "the agent cannot load sessions"
		}
		if !rec.Resumed {
			rec.Previous = prev
		}
	}
	if sid == "" {
		resp, err := s.conn.NewSession(s.ctx, acpsdk.NewSessionRequest{Cwd: cwd, McpServers: servers})
		if err != nil {
			return "", s.failure("session/new", err)
		}
		sid, configs, models = resp.SessionId, resp.ConfigOptions, resp.Models
	}
	rec.SessionID = string(sid)
	rec.Mode = s.req.Mode
	if s.req.Model != "" {
		if failed := s.setModel(sid, configs, models); failed != nil {
			return "", failed
		}
	}
	if s.req.Mode != "" {
		// The run's mode: the agent must know it (its session's
		// availableModes), else the run fails.
		if _, err := s.conn.SetSessionMode(s.ctx, acpsdk.SetSessionModeRequest{SessionId: sid, ModeId: acpsdk.SessionModeId(s.req.Mode)}); err != nil {
			return "", s.failure("session/set_mode", err)
		}
	}
	if s.warm != nil {
		rec.Warm = warmStarted
	}
	_ = s.jw.write(rec)
	s.sid.Store(sid)
	return sid, nil
}

func (s *session) agentGone() bool {
	select {
	case <-s.conn.Done():
		return true
	default:
		return false
	}
}

// failure describes why a protocol step failed.
func (s *session) failure(step string, err error) *record {
	switch {
	case s.ctx.Err() != nil:
		return &record{Kind: recError, Code: "acp-client-closed", Message: "the corral process driving the ACP session shut down during " + step}
	case s.agentGone():
		return &record{Kind: recError, Code: "acp-agent-exited", Message: "the ACP agent exited during " + step + " (its stderr is in the run's error)"}
	}
	return &record{Kind: recError, Code: "acp-" + strings.ReplaceAll(step, "/", "-"), Message: step + " failed: " + errText(err)}
}

// errText is an agent's error for a person: a JSON-RPC error's message and
// data, anything else as it is.
func errText(err error) string {
	var re *acpsdk.RequestError
	if errors.As(err, &re) {
		if re.Data != nil {
			if b, e := json.Marshal(re.Data); e == nil {
				return re.Message + ": " + string(b)
			}
		}
		return re.Message
	}
	return err.Error()
}

// teardown ends the session: the agent's stdin closes so it can exit, the
// terminals die, the journal gets its last records and the relay its exit
// code, and the journal FIFO closes, which ends the relay.
func (s *session) teardown(failed *record) {
	if s.abandoned.Load() {
		s.cancel()
		return
	}
	defer s.cancel()
	defer s.killHelpers()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := 0
	if s.stopped == acpsdk.StopReasonRefusal || s.stopped == acpsdk.StopReasonCancelled {
		code = 1 // the run failed, as its RUN_ERROR says
	}
	if failed != nil {
		code = 1
		_ = s.jw.write(*failed)
		s.log.Debug("acp: session failed", "code", failed.Code, "message", failed.Message)
	}
	if c, ok := s.in.Stdin().(io.Closer); ok {
		_ = c.Close()
	}
	stopKeeper := false
	if s.warm != nil {
		// The kept agent stays for the thread's next turn, unless the
		// turn failed or was cancelled: then nothing of it may survive,
		// and the next turn starts cold.
		select {
		case <-s.cancelling:
			stopKeeper = true
		default:
			stopKeeper = failed != nil || s.stopped == acpsdk.StopReasonCancelled || s.agentGone()
		}
	} else {
		if _, err := s.hd.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", closeInScript, "corral-acp-close", s.req.RunDir}}); err != nil {
			s.log.Debug("acp: closing the agent's stdin failed", "err", err)
		}
		select {
		case <-s.conn.Done():
		case <-time.After(s.h.opts.ExitGrace):
		}
	}
	s.terms.killAll(ctx)
	if s.warm != nil {
		// The kept agent's output is the next turn's: stop reading it.
		_ = s.out.Kill(ctx, 0)
	}
	_ = s.jw.write(record{Kind: recEnd})
	if stopKeeper {
		if err := harness.WriteFile(ctx, s.hd, path.Join(s.req.RunDir, "stop"), nil, "600"); err != nil {
			s.log.Warn("acp: asking the relay to stop the warm agent failed", "err", err)
		}
	}
	if err := harness.WriteFile(ctx, s.hd, path.Join(s.req.RunDir, "rc"), []byte(strconv.Itoa(code)+"\n"), "600"); err != nil {
		s.log.Warn("acp: recording the relay's exit code failed", "err", err)
	}
	if c, ok := s.ev.Stdin().(io.Closer); ok {
		_ = c.Close()
	}
	for _, p := range []sandbox.Process{s.ev, s.in, s.out} {
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		_, _ = p.Wait(wctx)
		wcancel()
	}
	if s.warm != nil {
		return // the relay stopped the kept agent, if it had to
	}
	// The relay stopped the agent's processes; this catches what a relay
	// killed before it could left behind.
	s.sweep(ctx)
}

// ReadTextFile serves fs/read_text_file from the sandbox's workspace.
func (s *session) ReadTextFile(ctx context.Context, p acpsdk.ReadTextFileRequest) (acpsdk.ReadTextFileResponse, error) {
	rel, err := workspaceRel(p.Path, s.req.WorkspaceRoot)
	if err != nil {
		return acpsdk.ReadTextFileResponse{}, err
	}
	data, err := s.hd.FS().ReadFile(ctx, sandbox.PortablePath(rel))
	if err != nil {
		return acpsdk.ReadTextFileResponse{}, err
	}
	text := string(data)
	if p.Line != nil || p.Limit != nil {
		lines := strings.SplitAfter(text, "\n")
		from := 0
		if p.Line != nil && *p.Line > 1 {
			from = min(*p.Line-1, len(lines))
		}
		to := len(lines)
		if p.Limit != nil && *p.Limit >= 0 {
			to = min(from+*p.Limit, len(lines))
		}
		text = strings.Join(lines[from:to], "")
	}
	return acpsdk.ReadTextFileResponse{Content: text}, nil
}

// WriteTextFile serves fs/write_text_file, gated by the policy's file
// write rule.
func (s *session) WriteTextFile(ctx context.Context, p acpsdk.WriteTextFileRequest) (acpsdk.WriteTextFileResponse, error) {
	rel, err := workspaceRel(p.Path, s.req.WorkspaceRoot)
	if err != nil {
		return acpsdk.WriteTextFileResponse{}, err
	}
	res := s.resolve(sandbox.ApproveFileWrite, rel)
	_ = s.jw.write(record{Kind: recFSWrite, Gate: string(sandbox.ApproveFileWrite), Target: rel, Title: "Write " + rel,
		Decision: decision(res), ApprovalID: res.ID, NeedsApproval: res.NeedsApproval, Off: s.off.Load()})
	if res.Decision != sandbox.Allow {
		return acpsdk.WriteTextFileResponse{}, denied(res, "writing "+rel)
	}
	if err := s.hd.FS().WriteFile(ctx, sandbox.PortablePath(rel), []byte(p.Content)); err != nil {
		return acpsdk.WriteTextFileResponse{}, err
	}
	return acpsdk.WriteTextFileResponse{}, nil
}

// SessionUpdate does nothing: the tee journaled the notification already.
func (s *session) SessionUpdate(context.Context, acpsdk.SessionNotification) error { return nil }
