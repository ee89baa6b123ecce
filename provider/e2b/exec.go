package e2b

import (
	"context"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"connectrpc.com/connect"

	pb "github.com/d10ffeed/corral/provider/e2b/internal/envd/process"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// handshakeTimeout bounds the start of a command (the first event).
const handshakeTimeout = 30 * time.Second

// stdinChunk is the largest SendInput payload.
const stdinChunk = 256 << 10

// sessionScript starts the command in a session of its own unless it
// already leads its process group: envd starts commands in its own group,
// and its SendSignal reaches one pid, so execproc's group kill needs the
// command to lead a group. setsid runs without forking when the caller is
// no group leader, so the pid envd reports stays the command's.
const sessionScript = `pg=
read -r _ _ _ _ pg _ </proc/$$/stat 2>/dev/null
if [ "$pg" != "$$" ] && command -v setsid >/dev/null 2>&1; then exec setsid "$@"; fi
exec "$@"`

// backend is execproc's Backend over envd's process service: one Start
// stream per command.
type backend struct{ h *handle }

func keepalive(req connect.AnyRequest) {
	req.Header().Set("Keepalive-Ping-Interval", "50")
}

// Start starts spec through envd and waits for its start event.
func (b backend) Start(ctx context.Context, op string, spec execproc.Spec) (execproc.Stream, error) {
	h := b.h
	env := make(map[string]string, len(spec.Env))
	for _, kv := range spec.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	args := append([]string{"-c", sessionScript, "sh"}, spec.Argv...)
	dir := spec.Dir
	stdin := spec.Stdin
	req := connect.NewRequest(&pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/sh", Args: args, Envs: env, Cwd: &dir}, Stdin: &stdin})
	keepalive(req)
	// The stream outlives ctx (the command's context ends the command
	// through execproc's kill, not by cutting the stream).
	sctx, cancel := context.WithCancel(context.Background())
	timer := time.AfterFunc(handshakeTimeout, cancel)
	stop := context.AfterFunc(ctx, cancel)
	st, err := h.proc.Start(sctx, req)
	var pid uint32
	if err == nil {
		for st.Receive() {
			if s := st.Msg().GetEvent().GetStart(); s != nil {
				pid = s.Pid
				break
			}
		}
	}
	timer.Stop()
	stop()
	if err == nil && pid == 0 {
		err = st.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
	}
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, sandbox.Wrap(sandbox.Canceled, op, h.id, ctx.Err())
		}
		return nil, rpcError(op, h.id, err)
	}
	if sctx.Err() != nil { // the handshake timer fired as the start arrived
		cancel()
		return nil, sandbox.Errorf(sandbox.DeadlineExceeded, op, h.id, "E2B envd: the command did not start within %v", handshakeTimeout)
	}
	return &stream{h: h, op: op, st: st, pid: pid, cancel: cancel}, nil
}

// stream is one command's Start stream.
type stream struct {
	h      *handle
	op     string
	st     *connect.ServerStreamForClient[pb.StartResponse]
	pid    uint32
	cancel context.CancelFunc

	wmu      sync.Mutex // one stdin call at a time (in order)
	closed   atomic.Bool
	received atomic.Int64
	exit     atomic.Pointer[int]
	once     sync.Once
}

// exitCode turns envd's end event into an exit code (128+N for signal N).
func exitCode(end *pb.ProcessEvent_EndEvent) int {
	if sig, ok := strings.CutPrefix(end.GetStatus(), "signal: "); ok {
		for n := syscall.Signal(1); n < 65; n++ {
			if n.String() == sig {
				return 128 + int(n)
			}
		}
	}
	return int(end.GetExitCode())
}

// Copy reads the events until the end event.
func (s *stream) Copy(stdout, stderr io.Writer) error {
	for s.st.Receive() {
		ev := s.st.Msg().GetEvent()
		switch {
		case ev.GetData() != nil:
			d := ev.GetData()
			var err error
			switch {
			case d.GetStdout() != nil:
				s.received.Add(int64(len(d.GetStdout())))
				_, err = stdout.Write(d.GetStdout())
			case d.GetStderr() != nil:
				s.received.Add(int64(len(d.GetStderr())))
				_, err = stderr.Write(d.GetStderr())
			}
			if err != nil {
				return err
			}
		case ev.GetEnd() != nil:
			code := exitCode(ev.GetEnd())
			s.exit.Store(&code)
			return nil
		}
	}
	if s.closed.Load() {
		return nil
	}
	err := s.st.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return sandbox.Errorf(sandbox.Unavailable, s.op, s.h.id,
		"E2B envd: the output stream of pid %d dropped after %d bytes, before its end event: %v", s.pid, s.received.Load(), err)
}

func (s *stream) selector() *pb.ProcessSelector {
	return &pb.ProcessSelector{Selector: &pb.ProcessSelector_Pid{Pid: s.pid}}
}

// Write sends stdin through SendInput, in order.
func (s *stream) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	n := 0
	for len(p) > 0 {
		chunk := p[:min(len(p), stdinChunk)]
		ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
		_, err := s.h.proc.SendInput(ctx, connect.NewRequest(&pb.SendInputRequest{Process: s.selector(),
			Input: &pb.ProcessInput{Input: &pb.ProcessInput_Stdin{Stdin: chunk}}}))
		cancel()
		if err != nil {
			return n, rpcError(s.op, s.h.id, err)
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

// CloseStdin sends EOF (envd's CloseStdin).
func (s *stream) CloseStdin() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	_, err := s.h.proc.CloseStdin(ctx, connect.NewRequest(&pb.CloseStdinRequest{Process: s.selector()}))
	if err != nil {
		return rpcError(s.op, s.h.id, err)
	}
	return nil
}

// Exit returns the code of the end event; when the stream ended without
// one (it dropped, or was abandoned) it re-attaches with Connect by pid
// and waits for the end there (envd serves the end of a process that
// ended in the last 30 s; one that ended earlier has lost its code:
// Unavailable).
func (s *stream) Exit(ctx context.Context) (int, error) {
	if c := s.exit.Load(); c != nil {
		return *c, nil
	}
	return s.reattach(ctx, nil, nil)
}

// reattach follows the process over a Connect stream until its end,
// copying what output arrives to the writers when they are not nil.
func (s *stream) reattach(ctx context.Context, stdout, stderr io.Writer) (int, error) {
	req := connect.NewRequest(&pb.ConnectRequest{Process: s.selector()})
	keepalive(req)
	st, err := s.h.proc.Connect(ctx, req)
	if err != nil {
		return -1, rpcError(s.op, s.h.id, err)
	}
	defer st.Close()
	for st.Receive() {
		ev := st.Msg().GetEvent()
		if d := ev.GetData(); d != nil {
			if stdout != nil && d.GetStdout() != nil {
				_, _ = stdout.Write(d.GetStdout())
			}
			if stderr != nil && d.GetStderr() != nil {
				_, _ = stderr.Write(d.GetStderr())
			}
		}
		if end := ev.GetEnd(); end != nil {
			code := exitCode(end)
			s.exit.Store(&code)
			return code, nil
		}
	}
	err = st.Err()
	if connect.CodeOf(err) == connect.CodeNotFound {
		return -1, sandbox.Errorf(sandbox.Unavailable, s.op, s.h.id,
			"E2B envd: pid %d ended while its stream was down; envd no longer knows its exit code", s.pid)
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return -1, rpcError(s.op, s.h.id, err)
}

// Close abandons the stream (the command runs on).
func (s *stream) Close() error {
	s.once.Do(func() {
		s.closed.Store(s.exit.Load() == nil)
		s.cancel()
		_ = s.st.Close()
	})
	return nil
}
