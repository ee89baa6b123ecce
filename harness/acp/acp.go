package acp

import (
	"context"
	"io"
	"log/slog"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// Name is the harness's name.
const Name = "acp"

// Request.Options keys this harness reads.
const (
	// OptionAuthMethod is an ACP authentication method id to authenticate
	// with after initialize; the agent must advertise it.
	OptionAuthMethod = "authMethod"
	// OptionStartTimeout bounds how long the agent may take to answer
	// initialize (a Go duration, e.g. "2m"); default Options.StartTimeout.
	OptionStartTimeout = "startTimeout"
	// OptionApprovalWait (a Go duration; "0" turns it off) is how long a
	// permission request the policy asks about waits, with the turn, for
	// a live answer (Runner.Answer, appended to harness.AnswersFile)
	// before it is decided by the policy's default; default
	// Options.ApprovalWait.
	OptionApprovalWait = "approvalWait"
	// OptionReattachWait (a Go duration; "0" turns it off) is how long
	// the relay keeps the agent of a session whose client went away (the
	// corral process that drove it died) for a client that takes the run
	// over (Harness.Reattach); default Options.ReattachWait.
	OptionReattachWait = "reattachWait"
)

// Options tune a Harness. Every field has a default.
type Options struct {
	// Logger receives what goes wrong in the background. Default: discard.
	Logger *slog.Logger
	// StartTimeout bounds the wait for the agent's initialize answer (which
	// includes the journal relay starting). Default 60s.
	StartTimeout time.Duration
	// ExitGrace is how long the agent gets to exit after its stdin closed
	// at the end of the turn, before the relay kills it. Default 5s.
	ExitGrace time.Duration
	// KillGrace is how long the agent's processes get between SIGTERM and
	// SIGKILL when the relay stops them. Default 2s.
	KillGrace time.Duration
	// CancelGrace is how long a cancelled run's agent gets to end its turn
	// after session/cancel before the runner kills it. Default 5s.
	CancelGrace time.Duration
	// ApprovalWait is how long a permission request that the policy asks
	// about (and no answer in Request.Approvals settles) waits for a live
	// answer before the policy's default decides it (a default of ask
	// denies). Zero (the default): it does not wait; the request is
	// rejected for this turn and answered in the thread's next run.
	ApprovalWait time.Duration
	// AnswerPoll is how often a waiting request reads the run's answers
	// file. Default 250ms.
	AnswerPoll time.Duration
	// ReattachWait is how long the relay keeps an agent whose client went
	// away, for another corral process that takes the run over to go on
	// with the same turn (Harness.Reattach). Default 2m; negative: not at
	// all (the run then ends at once with acp-session-lost).
	ReattachWait time.Duration
	// ClaimWait bounds how long Reattach waits for the relay to notice
	// that the previous client went away before it gives up (the client
	// may still live in another process). Default 30s.
	ClaimWait time.Duration
}

// Harness runs any Agent Client Protocol agent: Request.Args is the
// agent's command. See the package documentation for how a run stays
// durable. Its sessions live in this process: Close ends them.
type Harness struct {
	opts Options

	mu       sync.Mutex
	base     context.Context
	stop     context.CancelFunc
	sessions map[string]*session
	wg       sync.WaitGroup
}

var _ harness.Harness = (*Harness)(nil)

// New returns an ACP harness.
func New(opts Options) *Harness {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	if opts.ExitGrace <= 0 {
		opts.ExitGrace = 5 * time.Second
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = 2 * time.Second
	}
	if opts.CancelGrace <= 0 {
		opts.CancelGrace = 5 * time.Second
	}
	if opts.AnswerPoll <= 0 {
		opts.AnswerPoll = 250 * time.Millisecond
	}
	switch {
	case opts.ReattachWait == 0:
		opts.ReattachWait = 2 * time.Minute
	case opts.ReattachWait < 0:
		opts.ReattachWait = 0
	}
	if opts.ClaimWait <= 0 {
		opts.ClaimWait = 30 * time.Second
	}
	base, stop := context.WithCancel(context.Background())
	return &Harness{opts: opts, base: base, stop: stop, sessions: map[string]*session{}}
}

// Name returns "acp".
func (*Harness) Name() string { return Name }

// Translator returns the translator of an ACP run's journal.
func (*Harness) Translator(run harness.Run) harness.Translator { return newTranslator(run) }

// fifoScript makes the relay's FIFOs in a fresh directory ($1).
const fifoScript = `umask 077 && mkdir -p "$1" && cd "$1" && rm -f in out ev rc ` + outLog + ` hold.pid agent.exit agent.pid relay.pid && mkfifo in ev`

// Prepare starts the ACP client for a run and returns the relay to
// journal. The client runs in this process until the turn ends; see the
// package documentation.
func (h *Harness) Prepare(ctx context.Context, hd sandbox.Handle, req harness.Request) (harness.Invocation, error) {
	const op = "harness.acp"
	if len(req.Args) == 0 || req.Args[0] == "" {
		return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "no agent command: run the acp harness as acp:<agent command>")
	}
	caps := hd.Capabilities()
	for _, c := range []struct {
		ok   bool
		name string
	}{{caps.WritableStdin, "writableStdin"}, {caps.BackgroundProcesses, "backgroundProcesses"}} {
		if !c.ok {
			return harness.Invocation{}, &sandbox.UnsupportedCapabilityError{Provider: hd.Provider(), Capability: c.name,
				Hint: "the acp harness speaks ACP with the agent over long-lived processes whose stdin the host writes to"}
		}
	}
	if req.RunDir == "" || !path.IsAbs(req.RunDir) {
		return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, req.RunID, "the run needs an absolute private directory (Request.RunDir)")
	}
	servers, err := resolveMCP(req)
	if err != nil {
		return harness.Invocation{}, err
	}
	startTimeout := h.opts.StartTimeout
	if s := req.Options[OptionStartTimeout]; s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, OptionStartTimeout, "%q is not a positive duration", s)
		}
		startTimeout = d
	}
	approvalWait := h.opts.ApprovalWait
	if s := req.Options[OptionApprovalWait]; s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, OptionApprovalWait, "%q is not a duration of zero or more", s)
		}
		approvalWait = d
	}
	reattachWait := h.opts.ReattachWait
	if s := req.Options[OptionReattachWait]; s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, OptionReattachWait, "%q is not a duration of zero or more", s)
		}
		reattachWait = d
	}
	orphanTenths := "0"
	if reattachWait > 0 {
		orphanTenths = tenths(reattachWait)
	}
	if req.WorkspaceRoot == "" {
		req.WorkspaceRoot = hd.WorkspaceRoot()
	}
	cmd := sandbox.Command{Args: append([]string{"sh", "-c", relayScript, "corral-acp", req.RunDir, tenths(h.opts.KillGrace), orphanTenths}, req.Args...), Env: req.Env}
	if err := cmd.Validate(); err != nil {
		return harness.Invocation{}, err
	}
	warm, err := harness.ParseWarmOption(req.Options)
	if err != nil {
		return harness.Invocation{}, sandbox.Errorf(sandbox.InvalidArgument, op, OptWarm, "%q: want true or false", req.Options[OptWarm])
	}
	var ws *warmState
	var off int64
	if warm {
		var ok bool
		if ws, off, ok, err = h.prepareWarm(ctx, hd, req, servers); err != nil {
			return harness.Invocation{}, err
		}
		if ok {
			cmd = h.warmRelay(req, ws, orphanTenths)
		}
	}
	if ws == nil {
		res, err := hd.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", fifoScript, "corral-acp-fifo", req.RunDir}})
		if err != nil {
			return harness.Invocation{}, err
		}
		if res.ExitCode != 0 {
			return harness.Invocation{}, sandbox.Errorf(sandbox.Internal, op, req.RunID, "making the relay's FIFOs exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
		}
	}

	h.mu.Lock()
	if h.base.Err() != nil {
		h.mu.Unlock()
		return harness.Invocation{}, sandbox.Errorf(sandbox.FailedPrecondition, op, req.RunID, "the acp harness is closed")
	}
	sctx, cancel := context.WithCancel(h.base)
	h.mu.Unlock()
	s := &session{h: h, hd: hd, req: req, ctx: sctx, cancel: cancel, decisions: req.Approvals, mcp: servers,
		startTimeout: startTimeout, approvalWait: approvalWait, log: h.opts.Logger.With("run", req.RunID), warm: ws}
	if ws != nil {
		s.idBase = idBase()
	}
	if err := s.spawn(off); err != nil {
		cancel()
		return harness.Invocation{}, err
	}
	rec := record{Kind: recClient, Waiting: approvalWait.String(), Approvals: req.Approvals}
	if ws != nil {
		rec.WarmDir, rec.WarmPid = ws.dir, ws.pid
	}
	_ = s.jw.write(rec)
	h.start(s, s.run)
	return harness.Invocation{Command: cmd}, nil
}

// start registers a session and runs it in the background.
func (h *Harness) start(s *session, run func()) {
	h.mu.Lock()
	h.sessions[s.req.RunID] = s
	h.wg.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.wg.Done()
		run()
		h.mu.Lock()
		if h.sessions[s.req.RunID] == s {
			delete(h.sessions, s.req.RunID)
		}
		h.mu.Unlock()
	}()
}

// Close ends every session this process drives (each run records that its
// client shut down) and waits for them, or for ctx.
func (h *Harness) Close(ctx context.Context) error {
	h.mu.Lock()
	h.stop()
	h.mu.Unlock()
	done := make(chan struct{})
	go func() {
		h.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return sandbox.Wrap(sandbox.Canceled, "harness.acp.close", "", ctx.Err())
	}
}

// Wait blocks until this process's ACP client for the run has finished (or
// never ran here), or ctx ends.
func (h *Harness) Wait(ctx context.Context, runID string) error {
	h.mu.Lock()
	s := h.sessions[runID]
	h.mu.Unlock()
	if s == nil {
		return nil
	}
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return sandbox.Wrap(sandbox.Canceled, "harness.acp.wait", runID, ctx.Err())
	}
}

// closeStreams closes a helper's output streams it never reads.
func closeStreams(rs ...io.Reader) {
	for _, r := range rs {
		if c, ok := r.(io.Closer); ok {
			_ = c.Close()
		} else {
			go func() { _, _ = io.Copy(io.Discard, r) }()
		}
	}
}

// CheckMode accepts any session mode id (the run's mode): the agent says
// which it has only when the session starts; session/set_mode then sets
// it, and the run fails (session/set_mode) when the agent refuses it.
func (h *Harness) CheckMode(mode string) error {
	if strings.TrimSpace(mode) != mode || strings.ContainsAny(mode, "\n\r\x00") || len(mode) > 128 {
		return sandbox.Errorf(sandbox.InvalidArgument, "acp.mode", mode, "an ACP session mode id is one line of at most 128 characters without surrounding spaces")
	}
	return nil
}

var _ harness.Moder = (*Harness)(nil)

// AnswersLive reports true: a permission request waits for answers in
// the run's harness.AnswersFile when its approvalWait is set.
func (h *Harness) AnswersLive() bool { return true }

var _ harness.LiveApprover = (*Harness)(nil)

// Requires names the capabilities an ACP session needs: a stdin to speak
// the protocol on, and processes that outlive a call.
func (h *Harness) Requires() []string { return []string{"writableStdin", "backgroundProcesses"} }
