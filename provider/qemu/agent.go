package qemu

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/d10ffeed/corral/provider/qemu/guestproto"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// conns shares one agent connection per socket among every handle of the
// process: QEMU's chardev takes one client at a time.
var conns = struct {
	sync.Mutex
	m map[string]*agentConn
}{m: map[string]*agentConn{}}

// agentFor returns the process's connection to v's agent.
func agentFor(v vm, id string) *agentConn {
	conns.Lock()
	defer conns.Unlock()
	c := conns.m[v.dir]
	if c == nil {
		c = &agentConn{socks: v.socks, id: id, config: v.configPath()}
		conns.m[v.dir] = c
	}
	return c
}

// dropAgent closes and forgets the connection to v's agent.
func dropAgent(v vm) {
	conns.Lock()
	c := conns.m[v.dir]
	delete(conns.m, v.dir)
	conns.Unlock()
	if c != nil {
		c.close(errGone)
	}
}

// agentConn is one session with a guest agent. It reconnects lazily after
// the connection broke.
type agentConn struct {
	socks  []string // one per agent port; a port another process holds is skipped
	sock   string   // the one connected
	id     string
	config string // the VM's vm.json: without it the VM is gone

	mu      sync.Mutex
	c       net.Conn
	session uint64
	nextID  uint64
	streams map[uint64]*stream
	kills   map[uint64]chan string
	hello   chan *guestproto.Msg
	wmu     sync.Mutex
}

// ensure connects (or reconnects) and completes the Hello handshake. It
// tries the VM's agent ports in turn: QEMU leaves a second client of a
// port in its backlog, so a port whose Hello goes unanswered for a while
// is held by another process (or the guest is still booting) and the next
// one is tried.
func (a *agentConn) ensure(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.c != nil {
		return nil
	}
	window := 3 * time.Second
	for i := 0; ; i++ {
		sock := a.socks[i%len(a.socks)]
		err := a.tryLocked(ctx, sock, window)
		if err == nil {
			return nil
		}
		if errors.Is(err, errGone) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("no answer from the guest agent on %v (held by other processes?): %w", a.socks, ctx.Err())
		}
		if (i+1)%len(a.socks) == 0 && window < 30*time.Second {
			window *= 2
		}
	}
}

// tryLocked connects to sock and waits up to window for the HelloOK.
func (a *agentConn) tryLocked(ctx context.Context, sock string, window time.Duration) error {
	var c net.Conn
	var d net.Dialer
	for {
		var err error
		if c, err = d.DialContext(ctx, "unix", sock); err == nil {
			break
		}
		if _, serr := os.Stat(a.config); errors.Is(serr, os.ErrNotExist) {
			return errGone
		}
		if (errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)) && ctx.Err() == nil {
			if err := sleepCtx(ctx, 20*time.Millisecond); err == nil {
				continue
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	a.session = binary.BigEndian.Uint64(b[:]) | 1
	a.streams = map[uint64]*stream{}
	a.kills = map[uint64]chan string{}
	a.hello = make(chan *guestproto.Msg, 1)
	a.c, a.sock = c, sock
	dead := make(chan struct{})
	go a.readLoop(c, a.session, a.hello, dead)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	give := time.NewTimer(window)
	defer give.Stop()
	for {
		seed := make([]byte, 32)
		_, _ = rand.Read(seed)
		hello := &guestproto.Msg{T: guestproto.Hello, Session: a.session, TimeUnixNano: time.Now().UnixNano(), Hostname: hostName(a.id), Seed: seed}
		if err := a.writeLocked(hello); err != nil {
			a.dropLocked(c, err)
			return err
		}
		select {
		case <-a.hello:
			return nil
		case <-dead:
			a.dropLocked(c, errors.New("the agent connection closed during the handshake"))
			return fmt.Errorf("the agent connection to %s closed during the handshake", sock)
		case <-t.C:
		case <-give.C:
			a.dropLocked(c, errors.New("no answer"))
			return fmt.Errorf("no answer on %s", sock)
		case <-ctx.Done():
			a.dropLocked(c, ctx.Err())
			return ctx.Err()
		}
	}
}

func (a *agentConn) writeLocked(m *guestproto.Msg) error {
	f, err := guestproto.Encode(m)
	if err != nil {
		return err
	}
	a.wmu.Lock()
	defer a.wmu.Unlock()
	if a.c == nil {
		return errors.New("agent connection closed")
	}
	_, err = a.c.Write(f)
	return err
}

// send writes m in the current session.
func (a *agentConn) send(m *guestproto.Msg) error {
	a.mu.Lock()
	m.Session = a.session
	c := a.c
	a.mu.Unlock()
	if c == nil {
		return errors.New("agent connection closed")
	}
	f, err := guestproto.Encode(m)
	if err != nil {
		return err
	}
	a.wmu.Lock()
	defer a.wmu.Unlock()
	_, err = c.Write(f)
	return err
}

func (a *agentConn) readLoop(c net.Conn, session uint64, hello chan *guestproto.Msg, dead chan struct{}) {
	r := guestproto.NewReader(c)
	for {
		m, err := r.Read()
		if err != nil {
			close(dead)
			a.mu.Lock()
			a.dropLocked(c, fmt.Errorf("agent connection: %w", err))
			a.mu.Unlock()
			return
		}
		if m.Session != session {
			continue
		}
		if m.T == guestproto.HelloOK { // ensure holds a.mu while it waits for this
			select {
			case hello <- m:
			default:
			}
			continue
		}
		a.mu.Lock()
		switch m.T {
		case guestproto.KillDone:
			if ch := a.kills[m.ID]; ch != nil {
				delete(a.kills, m.ID)
				ch <- m.Err
			}
		default:
			if s := a.streams[m.ID]; s != nil {
				if m.T == guestproto.Exit || m.T == guestproto.Error {
					delete(a.streams, m.ID)
				}
				s.deliver(m)
			}
		}
		a.mu.Unlock()
	}
}

// dropLocked ends the connection c (if still current): every open stream
// and kill fails with err.
func (a *agentConn) dropLocked(c net.Conn, err error) {
	if a.c != c || c == nil {
		return
	}
	_ = c.Close()
	a.c = nil
	for id, s := range a.streams {
		s.fail(err)
		delete(a.streams, id)
	}
	for id, ch := range a.kills {
		ch <- err.Error()
		delete(a.kills, id)
	}
}

func (a *agentConn) close(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dropLocked(a.c, err)
}

// start starts spec in the guest and returns its stream once it runs.
func (a *agentConn) start(ctx context.Context, op string, spec execproc.Spec) (*stream, error) {
	if err := a.ensure(ctx); err != nil {
		return nil, sandbox.Wrap(connCode(err), op, a.id, err)
	}
	s := &stream{a: a, started: make(chan struct{}), wake: make(chan struct{}, 1)}
	a.mu.Lock()
	a.nextID++
	s.id = a.nextID
	a.streams[s.id] = s
	a.mu.Unlock()
	err := a.send(&guestproto.Msg{T: guestproto.Start, ID: s.id, Argv: spec.Argv, Env: spec.Env, Dir: spec.Dir, Stdin: spec.Stdin})
	if err != nil {
		a.close(err)
		return nil, sandbox.Wrap(sandbox.Unavailable, op, a.id, err)
	}
	select {
	case <-s.started:
	case <-ctx.Done():
		_ = s.Close()
		return nil, sandbox.Wrap(sandbox.CodeOf(ctx.Err()), op, a.id, ctx.Err())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.startErr != "" {
		return nil, sandbox.Errorf(sandbox.FailedPrecondition, op, a.id, "guest agent: %s", s.startErr)
	}
	if s.err != nil {
		return nil, sandbox.Wrap(sandbox.Unavailable, op, a.id, s.err)
	}
	return s, nil
}

// kill is the execproc.KillFunc: the agent signals the process group
// natively (kill(-pgid)) and waits for it to be gone.
func (a *agentConn) kill(ctx context.Context, pid int, sig syscall.Signal, grace time.Duration) error {
	if err := a.ensure(ctx); err != nil {
		return sandbox.Wrap(connCode(err), "qemu.kill", a.id, err)
	}
	ch := make(chan string, 1)
	a.mu.Lock()
	a.nextID++
	id := a.nextID
	a.kills[id] = ch
	a.mu.Unlock()
	if err := a.send(&guestproto.Msg{T: guestproto.Kill, ID: id, PID: pid, Signal: int(sig), GraceMS: grace.Milliseconds()}); err != nil {
		a.close(err)
		return sandbox.Wrap(sandbox.Unavailable, "qemu.kill", a.id, err)
	}
	select {
	case msg := <-ch:
		if msg != "" {
			return sandbox.Errorf(sandbox.Internal, "qemu.kill", a.id, "%s", msg)
		}
		return nil
	case <-ctx.Done():
		return sandbox.Wrap(sandbox.CodeOf(ctx.Err()), "qemu.kill", a.id, ctx.Err())
	}
}

// stream is one command in the guest: an execproc.Stream.
type stream struct {
	a       *agentConn
	id      uint64
	started chan struct{}
	wake    chan struct{}

	mu       sync.Mutex
	chunks   []*guestproto.Msg
	startErr string
	err      error // transport failure
	exited   bool
	code     int
	closed   bool
	once     sync.Once
}

func (s *stream) signalStarted() { s.once.Do(func() { close(s.started) }) }

// deliver takes a message for this stream (called with a.mu held).
func (s *stream) deliver(m *guestproto.Msg) {
	s.mu.Lock()
	switch m.T {
	case guestproto.Started:
	case guestproto.Error:
		s.startErr = m.Err
	case guestproto.Output:
		if !s.closed {
			s.chunks = append(s.chunks, m)
		}
	case guestproto.Exit:
		s.exited, s.code = true, m.Code
	}
	s.mu.Unlock()
	s.signalStarted()
	s.poke()
}

func (s *stream) fail(err error) {
	s.mu.Lock()
	if s.err == nil && !s.exited {
		s.err = err
	}
	s.mu.Unlock()
	s.signalStarted()
	s.poke()
}

func (s *stream) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Copy copies the command's output until its exit, a transport failure or
// Close.
func (s *stream) Copy(stdout, stderr io.Writer) error {
	for {
		s.mu.Lock()
		chunks := s.chunks
		s.chunks = nil
		done, err, closed := s.exited, s.err, s.closed
		s.mu.Unlock()
		for _, c := range chunks {
			w := stdout
			if c.FD == 2 {
				w = stderr
			}
			if _, werr := w.Write(c.Data); werr != nil {
				_ = s.Close()
				return werr
			}
		}
		if len(chunks) > 0 {
			continue
		}
		if done || closed {
			return nil
		}
		if err != nil {
			return err
		}
		<-s.wake
	}
}

// Write sends data to the command's standard input.
func (s *stream) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := p
		if len(c) > guestproto.ChunkSize {
			c = c[:guestproto.ChunkSize]
		}
		if err := s.a.send(&guestproto.Msg{T: guestproto.StdinData, ID: s.id, Data: c}); err != nil {
			return n, err
		}
		n += len(c)
		p = p[len(c):]
	}
	return n, nil
}

// CloseStdin sends EOF to the command's standard input.
func (s *stream) CloseStdin() error {
	return s.a.send(&guestproto.Msg{T: guestproto.CloseStdin, ID: s.id})
}

// Exit returns the exit code.
func (s *stream) Exit(ctx context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exited {
		return s.code, nil
	}
	if s.err != nil {
		return 0, sandbox.Wrap(sandbox.Unavailable, "qemu.exec", s.a.id, s.err)
	}
	return 0, sandbox.Errorf(sandbox.Unavailable, "qemu.exec", s.a.id, "the command's stream was closed before it exited")
}

// Close abandons the stream (the command keeps running).
func (s *stream) Close() error {
	s.mu.Lock()
	s.closed = true
	s.chunks = nil
	s.mu.Unlock()
	s.poke()
	return nil
}

// backend is the execproc.Backend of one VM.
type backend struct{ a *agentConn }

// Start starts spec through the guest agent.
func (b backend) Start(ctx context.Context, op string, spec execproc.Spec) (execproc.Stream, error) {
	return b.a.start(ctx, op, spec)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// connCode is the code of a connection failure.
func connCode(err error) sandbox.Code {
	switch {
	case errors.Is(err, errGone):
		return sandbox.NotFound
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return sandbox.CodeOf(err)
	}
	return sandbox.Unavailable
}
