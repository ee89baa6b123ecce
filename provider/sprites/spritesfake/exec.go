package spritesfake

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/d10ffeed/corral/internal/fakecloud"
)

// Frame tags of the exec WebSocket's binary messages.
const (
	TagStdin    = 0x00
	TagStdout   = 0x01
	TagStderr   = 0x02
	TagExit     = 0x03
	TagStdinEOF = 0x04
)

// defaultMaxRunAfterDisconnect is a non-TTY session's default.
const defaultMaxRunAfterDisconnect = 10 * time.Second

// session is one exec session.
type session struct {
	p       *fakecloud.Proc
	command string
	dir     string
	created time.Time
	live    bool // a client is attached
}

// SessionInfo is the first JSON message of an exec WebSocket.
type SessionInfo struct {
	Type      string `json:"type"`
	SessionID int    `json:"session_id"`
	Command   string `json:"command"`
	Created   int64  `json:"created"`
	IsOwner   bool   `json:"is_owner"`
	TTY       bool   `json:"tty"`
}

// exec serves the exec WebSocket, or lists the sessions for a plain GET.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	sp := s.lookup(w, r)
	if sp == nil {
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		s.listSessions(w, sp)
		return
	}
	q := r.URL.Query()
	argv := q["cmd"]
	if len(argv) == 0 {
		argv = []string{"bash"}
	}
	if p := q.Get("path"); p != "" {
		argv = append([]string{p}, argv[1:]...)
	}
	if q.Get("tty") == "true" {
		apiError(w, http.StatusBadRequest, "invalid_request", "the fake serves non-TTY sessions only")
		return
	}
	dir := q.Get("dir")
	if dir == "" {
		dir = sp.sb.Home
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		apiError(w, http.StatusBadRequest, "invalid_request", "working directory %q does not exist", dir)
		return
	}
	maxRun := defaultMaxRunAfterDisconnect
	if v := q.Get("max_run_after_disconnect"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			if n, nerr := strconv.Atoi(v); nerr == nil {
				d, err = time.Duration(n)*time.Second, nil
			}
		}
		if err != nil || d < 0 {
			apiError(w, http.StatusBadRequest, "invalid_request", "bad max_run_after_disconnect %q", v)
			return
		}
		maxRun = d
	}
	var env []string
	if vals, ok := q["env"]; ok {
		// env= replaces the default environment.
		have := map[string]bool{}
		for _, kv := range vals {
			k, _, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				apiError(w, http.StatusBadRequest, "invalid_request", "env %q is not KEY=VALUE", kv)
				return
			}
			have[k] = true
		}
		for _, k := range []string{"PATH", "HOME", "LANG"} {
			if !have[k] {
				env = append(env, k+"=")
			}
		}
		env = append(env, vals...)
	}
	stdin := q.Get("stdin") == "true"
	p, err := sp.sb.Start(fakecloud.Spec{Argv: argv, Env: env, Dir: dir, Stdin: stdin})
	if err != nil {
		apiError(w, http.StatusNotFound, "not_found", "sprite is gone: %v", err)
		return
	}
	conn, err := fakecloud.AcceptWebSocket(w, r)
	if err != nil {
		_ = p.Signal(syscall.SIGKILL)
		return
	}
	ss := &session{p: p, command: strings.Join(argv, " "), dir: dir, created: time.Now(), live: true}
	id := p.PID()
	s.mu.Lock()
	if id > 0 {
		sp.sessions[id] = ss
	}
	s.mu.Unlock()
	s.serveSession(r.Context(), conn, sp, ss, stdin, maxRun)
}

// serveSession streams one session until its process exits (or the
// client goes away).
func (s *Server) serveSession(ctx context.Context, conn *websocket.Conn, sp *sprite, ss *session, stdin bool, maxRun time.Duration) {
	defer conn.CloseNow()
	p := ss.p
	var wmu sync.Mutex
	send := func(typ websocket.MessageType, b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		return conn.Write(wctx, typ, b)
	}
	info, _ := json.Marshal(SessionInfo{Type: "session_info", SessionID: p.PID(), Command: ss.command, Created: ss.created.Unix(), IsOwner: true})
	if err := send(websocket.MessageText, info); err != nil {
		s.disconnected(sp, ss, maxRun)
		return
	}
	gone := make(chan struct{})
	go func() { // client frames: stdin, EOF, signals
		defer close(gone)
		for {
			typ, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			switch typ {
			case websocket.MessageBinary:
				if len(data) == 0 || !stdin {
					continue
				}
				switch data[0] {
				case TagStdin:
					_, _ = p.WriteStdin(data[1:])
				case TagStdinEOF:
					p.CloseStdin()
				}
			case websocket.MessageText:
				var m struct {
					Type   string `json:"type"`
					Signal string `json:"signal"`
				}
				if json.Unmarshal(data, &m) == nil && m.Type == "signal" {
					if sig, ok := parseSignal(m.Signal); ok {
						_ = p.Signal(sig)
					}
				}
			}
		}
	}()
	var out sync.WaitGroup
	failed := make(chan struct{}, 2)
	for i, rd := range []interface{ Read([]byte) (int, error) }{p.Stdout(), p.Stderr()} {
		tag := byte(TagStdout + i)
		out.Go(func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := rd.Read(buf)
				if n > 0 {
					if send(websocket.MessageBinary, append([]byte{tag}, buf[:n]...)) != nil {
						failed <- struct{}{}
						return
					}
				}
				if err != nil {
					return
				}
			}
		})
	}
	drained := make(chan struct{})
	go func() { out.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-failed:
		s.disconnected(sp, ss, maxRun)
		return
	case <-gone:
		s.disconnected(sp, ss, maxRun)
		return
	}
	select {
	case <-p.Done():
	case <-gone:
		s.disconnected(sp, ss, maxRun)
		return
	}
	p.Release()
	code := p.ExitCode()
	s.mu.Lock()
	ss.live = false
	s.mu.Unlock()
	_ = send(websocket.MessageBinary, []byte{TagExit, byte(code)})
	exit, _ := json.Marshal(map[string]any{"type": "exit", "exit_code": code})
	_ = send(websocket.MessageText, exit)
	_ = conn.Close(websocket.StatusNormalClosure, "")
}

// disconnected applies max_run_after_disconnect to a session whose
// client went away before it exited.
func (s *Server) disconnected(sp *sprite, ss *session, maxRun time.Duration) {
	s.mu.Lock()
	ss.live = false
	s.mu.Unlock()
	p := ss.p
	go func() {
		// The output keeps draining (nobody reads it) so the command
		// never blocks on a full pipe.
		for _, rd := range []interface{ Read([]byte) (int, error) }{p.Stdout(), p.Stderr()} {
			go func() {
				buf := make([]byte, 32<<10)
				for {
					if _, err := rd.Read(buf); err != nil {
						return
					}
				}
			}()
		}
		if maxRun > 0 {
			t := time.NewTimer(maxRun)
			select {
			case <-t.C:
				_ = p.Signal(syscall.SIGKILL)
			case <-p.Done():
				t.Stop()
			}
		}
		<-p.Done()
		p.Release()
	}()
}

func (s *Server) listSessions(w http.ResponseWriter, sp *sprite) {
	type sessJSON struct {
		ID       int    `json:"id"`
		Command  string `json:"command"`
		Workdir  string `json:"workdir"`
		Created  string `json:"created"`
		IsActive bool   `json:"is_active"`
		TTY      bool   `json:"tty"`
	}
	out := struct {
		Sessions []sessJSON `json:"sessions"`
	}{Sessions: []sessJSON{}}
	s.mu.Lock()
	for id, ss := range sp.sessions {
		if ss.p.Exited() {
			continue
		}
		out.Sessions = append(out.Sessions, sessJSON{ID: id, Command: ss.command, Workdir: ss.dir,
			Created: ss.created.UTC().Format(time.RFC3339), IsActive: ss.live})
	}
	s.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, out)
}

// kill signals a session's process group, escalating to SIGKILL after
// timeout, and streams the progress as NDJSON.
func (s *Server) kill(w http.ResponseWriter, r *http.Request) {
	sp := s.lookup(w, r)
	if sp == nil {
		return
	}
	id, _ := strconv.Atoi(r.PathValue("id"))
	s.mu.Lock()
	ss := sp.sessions[id]
	s.mu.Unlock()
	if ss == nil {
		apiError(w, http.StatusNotFound, "not_found", "session %s not found", r.PathValue("id"))
		return
	}
	q := r.URL.Query()
	sigName := q.Get("signal")
	if sigName == "" {
		sigName = "SIGTERM"
	}
	sig, ok := parseSignal(sigName)
	if !ok {
		apiError(w, http.StatusBadRequest, "invalid_request", "unknown signal %q", sigName)
		return
	}
	timeout := 10 * time.Second
	if v := q.Get("timeout"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			apiError(w, http.StatusBadRequest, "invalid_request", "bad timeout %q", v)
			return
		}
		timeout = d
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	p := ss.p
	name := "SIG" + strings.TrimPrefix(strings.ToUpper(sigName), "SIG")
	if n, err := strconv.Atoi(sigName); err == nil {
		name = strconv.Itoa(n)
	}
	writeNDJSON(w, map[string]any{"type": "signal", "message": fmt.Sprintf("Signaling %s to process group %d", name, id), "signal": name, "pid": id})
	if id > 0 {
		_ = syscall.Kill(-id, sig)
	}
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM || sig == syscall.SIGINT || sig == syscall.SIGHUP {
		if !groupGone(r.Context(), id, timeout) {
			writeNDJSON(w, map[string]any{"type": "timeout", "message": fmt.Sprintf("Process group %d still running after %v, sending SIGKILL", id, timeout), "signal": "SIGKILL", "pid": id})
			_ = syscall.Kill(-id, syscall.SIGKILL)
			groupGone(r.Context(), id, 5*time.Second)
		}
		if r.Context().Err() != nil {
			return
		}
		select {
		case <-p.Done():
		case <-time.After(5 * time.Second):
		}
		writeNDJSON(w, map[string]any{"type": "exited", "message": fmt.Sprintf("Process %d exited", id), "pid": id, "exit_code": p.ExitCode()})
	}
	writeNDJSON(w, map[string]any{"type": "complete", "message": "kill complete", "pid": id})
}

// groupGone waits up to d for the process group pgid to be empty.
func groupGone(ctx context.Context, pgid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if pgid <= 0 || syscall.Kill(-pgid, 0) != nil {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// parseSignal accepts "TERM", "SIGTERM" or a number.
func parseSignal(v string) (syscall.Signal, bool) {
	if n, err := strconv.Atoi(v); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), true
	}
	switch strings.TrimPrefix(strings.ToUpper(v), "SIG") {
	case "TERM":
		return syscall.SIGTERM, true
	case "KILL":
		return syscall.SIGKILL, true
	case "INT":
		return syscall.SIGINT, true
	case "HUP":
		return syscall.SIGHUP, true
	case "QUIT":
		return syscall.SIGQUIT, true
	case "USR1":
		return syscall.SIGUSR1, true
	case "USR2":
		return syscall.SIGUSR2, true
	case "STOP":
		return syscall.SIGSTOP, true
	case "CONT":
		return syscall.SIGCONT, true
	}
	return 0, false
}
