package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/d10ffeed/corral/provider/qemu/guestproto"
)

// server runs commands for the host over one port. It is safe to call
// readLoop again on the same port after the host reconnected: processes
// persist, sessions do not. Each port has its own server; they share one
// reaper.
type server struct {
	log     *slog.Logger
	baseEnv []string
	bootID  string
	r       *reaper

	out chan []byte // frames to the host, written by one goroutine

	mu      sync.Mutex
	session uint64
	procs   map[uint64]*proc // by host id, current session only
}

// reaper collects exited children for every port's server.
type reaper struct {
	mu    sync.Mutex
	byPID map[int]*proc // every started process not yet reaped
}

func newReaper() *reaper { return &reaper{byPID: map[int]*proc{}} }

type proc struct {
	session uint64
	id      uint64
	pid     int
	stdin   *os.File // nil without stdin
	status  chan syscall.WaitStatus
}

func newServer(log *slog.Logger, baseEnv []string, bootID string, r *reaper) *server {
	return &server{log: log, baseEnv: baseEnv, bootID: bootID, r: r, out: make(chan []byte, 64),
		procs: map[uint64]*proc{}}
}

// send queues m for the host.
func (s *server) send(m *guestproto.Msg) {
	f, err := guestproto.Encode(m)
	if err != nil {
		s.log.Error("encode", "err", err)
		return
	}
	s.out <- f
}

// writeLoop writes queued frames to w until w fails.
func (s *server) writeLoop(w io.Writer) {
	for f := range s.out {
		if _, err := w.Write(f); err != nil {
			s.log.Error("port write", "err", err)
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// readLoop handles messages from r until it ends.
func (s *server) readLoop(r io.Reader) error {
	fr := guestproto.NewReader(r)
	for {
		m, err := fr.Read()
		if err != nil {
			return err
		}
		s.handle(m)
	}
}

func (s *server) current(m *guestproto.Msg) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return m.Session == s.session
}

func (s *server) handle(m *guestproto.Msg) {
	if m.T == guestproto.Hello {
		s.mu.Lock()
		if m.Session != s.session { // a repeated Hello of this session changes nothing
			s.session = m.Session
			for id, p := range s.procs {
				if p.stdin != nil {
					_ = p.stdin.Close()
				}
				delete(s.procs, id)
			}
		}
		s.mu.Unlock()
		stepClock(m.TimeUnixNano)
		reseed(m.Seed)
		setHostname(m.Hostname)
		s.send(&guestproto.Msg{T: guestproto.HelloOK, Session: m.Session, BootID: s.bootID, Uptime: uptime()})
		return
	}
	if !s.current(m) {
		return
	}
	switch m.T {
	case guestproto.Start:
		s.start(m)
	case guestproto.StdinData, guestproto.CloseStdin:
		s.mu.Lock()
		p := s.procs[m.ID]
		s.mu.Unlock()
		if p == nil || p.stdin == nil {
			return
		}
		if m.T == guestproto.CloseStdin {
			_ = p.stdin.Close()
			return
		}
		_, _ = p.stdin.Write(m.Data) // a command that closed its stdin just loses the data
	case guestproto.Kill:
		go func() {
			err := killGroup(m.PID, syscall.Signal(m.Signal), time.Duration(m.GraceMS)*time.Millisecond)
			r := &guestproto.Msg{T: guestproto.KillDone, Session: m.Session, ID: m.ID}
			if err != nil {
				r.Err = err.Error()
			}
			s.send(r)
		}()
	}
}

// start starts m's command as the leader of a new session.
func (s *server) start(m *guestproto.Msg) {
	fail := func(err error) {
		s.send(&guestproto.Msg{T: guestproto.Error, Session: m.Session, ID: m.ID, Err: err.Error()})
	}
	if len(m.Argv) == 0 {
		fail(errors.New("empty argv"))
		return
	}
	var files [3]*os.File
	var parent []*os.File
	closeAll := func() {
		for _, f := range append(files[:], parent...) {
			if f != nil {
				_ = f.Close()
			}
		}
	}
	var stdin *os.File
	if m.Stdin {
		r, w, err := os.Pipe()
		if err != nil {
			fail(err)
			return
		}
		files[0], stdin = r, w
	} else {
		n, err := os.Open(os.DevNull)
		if err != nil {
			fail(err)
			return
		}
		files[0] = n
	}
	outs := make([]*os.File, 2)
	for i := range outs {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll()
			fail(err)
			return
		}
		files[1+i], outs[i] = w, r
		parent = append(parent, r)
	}
	dir := m.Dir
	if dir == "" {
		dir = "/"
	}
	attr := &syscall.ProcAttr{Dir: dir, Env: overlay(s.baseEnv, m.Env),
		Files: []uintptr{files[0].Fd(), files[1].Fd(), files[2].Fd()},
		Sys:   &syscall.SysProcAttr{Setsid: true}}
	p := &proc{session: m.Session, id: m.ID, stdin: stdin, status: make(chan syscall.WaitStatus, 1)}
	path, err := lookPath(m.Argv[0], attr.Env)
	if err != nil {
		closeAll()
		if stdin != nil {
			_ = stdin.Close()
		}
		fail(err)
		return
	}
	s.r.mu.Lock() // held across fork so the reaper cannot reap before byPID knows the pid
	pid, err := syscall.ForkExec(path, m.Argv, attr)
	if err == nil {
		p.pid = pid
		s.r.byPID[pid] = p
	}
	s.r.mu.Unlock()
	if err == nil {
		s.mu.Lock()
		s.procs[m.ID] = p
		s.mu.Unlock()
	}
	for _, f := range files {
		_ = f.Close()
	}
	if err != nil {
		for _, f := range parent {
			_ = f.Close()
		}
		if stdin != nil {
			_ = stdin.Close()
		}
		fail(fmt.Errorf("start %s: %w", m.Argv[0], err))
		return
	}
	s.send(&guestproto.Msg{T: guestproto.Started, Session: m.Session, ID: m.ID, PID: pid})
	var wg sync.WaitGroup
	for i, r := range outs {
		wg.Add(1)
		go func(fd int, r *os.File) {
			defer wg.Done()
			defer r.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := r.Read(buf)
				if n > 0 && s.sessionIs(p.session) {
					s.send(&guestproto.Msg{T: guestproto.Output, Session: p.session, ID: p.id, FD: fd, Data: append([]byte(nil), buf[:n]...)})
				}
				if err != nil {
					return
				}
			}
		}(i+1, r)
	}
	go func() {
		wg.Wait()
		st := <-p.status
		s.mu.Lock()
		if s.procs[p.id] == p {
			delete(s.procs, p.id)
		}
		s.mu.Unlock()
		if p.stdin != nil {
			_ = p.stdin.Close()
		}
		if s.sessionIs(p.session) {
			s.send(&guestproto.Msg{T: guestproto.Exit, Session: p.session, ID: p.id, Code: exitCode(st)})
		}
	}()
}

func (s *server) sessionIs(id uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session == id
}

// reap collects every exited child and hands the status of the ones a
// server started to their waiters.
func (r *reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var st syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &st, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
		if p := r.byPID[pid]; p != nil {
			delete(r.byPID, pid)
			p.status <- st
		}
	}
}

func exitCode(st syscall.WaitStatus) int {
	if st.Signaled() {
		return 128 + int(st.Signal())
	}
	return st.ExitStatus()
}

// killGroup sends sig to the process group pgid. For SIGTERM it sends
// SIGKILL to what is left after grace; for SIGTERM and SIGKILL it returns
// once the group is gone.
func killGroup(pgid int, sig syscall.Signal, grace time.Duration) error {
	if pgid <= 1 {
		return fmt.Errorf("refusing to signal group %d", pgid)
	}
	if err := syscall.Kill(-pgid, sig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return err
	}
	if sig != syscall.SIGTERM && sig != syscall.SIGKILL {
		return nil
	}
	if sig == syscall.SIGTERM {
		if gone(pgid, grace) {
			return nil
		}
		if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return err
		}
	}
	if gone(pgid, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("process group %d survived SIGKILL", pgid)
}

// gone waits up to d for the group to have no member left.
func gone(pgid int, d time.Duration) bool {
	end := time.Now().Add(d)
	for {
		if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// overlay lays env (KEY=VALUE) over base.
func overlay(base, env []string) []string {
	out := make([]string, 0, len(base)+len(env))
	idx := map[string]int{}
	for _, kv := range append(append([]string{}, base...), env...) {
		k := kv
		for i := 0; i < len(kv); i++ {
			if kv[i] == '=' {
				k = kv[:i]
				break
			}
		}
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// lookPath finds file in env's PATH unless it has a slash.
func lookPath(file string, env []string) (string, error) {
	for i := 0; i < len(file); i++ {
		if file[i] == '/' {
			return file, nil
		}
	}
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if len(kv) > 5 && kv[:5] == "PATH=" {
			path = kv[5:]
		}
	}
	start := 0
	for i := 0; i <= len(path); i++ {
		if i == len(path) || path[i] == ':' {
			d := path[start:i]
			start = i + 1
			if d == "" {
				d = "."
			}
			c := d + "/" + file
			if fi, err := os.Stat(c); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
				return c, nil
			}
		}
	}
	return "", fmt.Errorf("%s: not found in PATH", file)
}
