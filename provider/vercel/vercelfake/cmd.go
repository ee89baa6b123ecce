package vercelfake

import (
	"encoding/json"
	"io"
	"net/http"
	"path"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/d10ffeed/corral/internal/fakecloud"
)

// command is one command of a session, with its output kept for every
// logs request (each reads from the start and follows until the end).
type command struct {
	id, sid   string
	name      string
	args      []string
	cwd       string
	started   time.Time
	proc      *fakecloud.Proc
	exitCode  *int
	duration  int64
	mu        sync.Mutex
	lines     []logLine
	outDone   int // streams whose copy ended (2: all output is in lines)
	changed   chan struct{}
	finished  chan struct{}
	finishOne sync.Once
}

type logLine struct {
	Stream string `json:"stream"`
	Data   string `json:"data"`
}

func (c *command) json(finished bool) map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]any{"id": c.id, "name": c.name, "args": c.args, "cwd": c.cwd, "sessionId": c.sid,
		"exitCode": nil, "startedAt": millis(c.started)}
	if c.exitCode != nil && finished {
		m["exitCode"], m["durationMs"] = *c.exitCode, c.duration
	}
	return m
}

// pump copies one output stream into the log, splitting only at whole
// UTF-8 characters (the API's data is a JSON string).
func (c *command) pump(stream string, r io.Reader) {
	buf := make([]byte, 32<<10)
	var carry []byte
	for {
		n, err := r.Read(buf)
		if n > 0 {
			b := append(carry, buf[:n]...)
			cut := len(b)
			for i := 0; i < utf8.UTFMax && i < len(b); i++ {
				if st := len(b) - 1 - i; utf8.RuneStart(b[st]) {
					if !utf8.FullRune(b[st:]) {
						cut = st
					}
					break
				}
			}
			carry = append([]byte(nil), b[cut:]...)
			c.add(stream, b[:cut])
		}
		if err != nil {
			c.add(stream, carry)
			break
		}
	}
	c.mu.Lock()
	c.outDone++
	c.notify()
	c.mu.Unlock()
}

func (c *command) add(stream string, b []byte) {
	if len(b) == 0 {
		return
	}
	c.mu.Lock()
	c.lines = append(c.lines, logLine{Stream: stream, Data: string(b)})
	c.notify()
	c.mu.Unlock()
}

// notify wakes every follower; c.mu is held.
func (c *command) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// reap records the exit once the process ended and its output drained.
func (c *command) reap() {
	<-c.proc.Done()
	c.mu.Lock()
	for c.outDone < 2 {
		ch := c.changed
		c.mu.Unlock()
		<-ch
		c.mu.Lock()
	}
	code := c.proc.ExitCode()
	c.exitCode = &code
	c.duration = time.Since(c.started).Milliseconds()
	c.notify()
	c.mu.Unlock()
	c.proc.Release()
	c.finishOne.Do(func() { close(c.finished) })
}

// follow writes the log lines from the start as NDJSON until the command
// ended (then true) or the client went away; a dropAfter fault cuts the
// connection after that many bytes of data.
func (c *command) follow(w http.ResponseWriter, r *http.Request, enc *json.Encoder, fl http.Flusher) bool {
	drop, dropping := fakecloud.StreamFault(r.Context())
	sent := 0
	for i := 0; ; {
		c.mu.Lock()
		lines := c.lines[i:]
		done := c.exitCode != nil
		ch := c.changed
		c.mu.Unlock()
		for _, l := range lines {
			if dropping && sent+len(l.Data) > drop {
				l.Data = l.Data[:max(drop-sent, 0)]
				if l.Data != "" {
					_ = enc.Encode(l)
				}
				fl.Flush()
				fakecloud.NoteDrop(r.Context())
				panic(http.ErrAbortHandler)
			}
			sent += len(l.Data)
			if err := enc.Encode(l); err != nil {
				return false
			}
		}
		i += len(lines)
		if len(lines) > 0 {
			fl.Flush()
		}
		if done {
			return true // the exit is recorded after all output: nothing follows
		}
		select {
		case <-ch:
		case <-r.Context().Done():
			return false
		}
	}
}

// runBody is POST …/cmd.
type runBody struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Cwd     string            `json:"cwd"`
	Env     map[string]string `json:"env"`
	Sudo    bool              `json:"sudo"`
	Wait    bool              `json:"wait"`
	Logs    bool              `json:"logs"`
	Timeout *int64            `json:"timeout"`
}

func (s *Server) run(w http.ResponseWriter, r *http.Request, se *session) {
	var body runBody
	if err := fakecloud.DecodeJSON(r, &body); err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", "%v", err)
		return
	}
	if body.Command == "" {
		apiError(w, http.StatusBadRequest, "bad_request", "command is required")
		return
	}
	cwd := body.Cwd
	if cwd == "" {
		cwd = se.sb.sb.Root
	} else if !path.IsAbs(cwd) {
		cwd = path.Join(se.sb.sb.Root, cwd)
	}
	env := make([]string, 0, len(body.Env))
	for k, v := range body.Env {
		env = append(env, k+"="+v)
	}
	argv := append([]string{body.Command}, body.Args...)
	proc, err := se.sb.sb.Start(fakecloud.Spec{Argv: argv, Env: env, Dir: cwd})
	if err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", "%v", err)
		return
	}
	s.mu.Lock()
	c := &command{id: s.newID("cmd"), sid: se.id, name: body.Command, args: append([]string{}, body.Args...), cwd: cwd,
		started: time.Now(), proc: proc, changed: make(chan struct{}), finished: make(chan struct{})}
	if c.args == nil {
		c.args = []string{}
	}
	s.commands[c.id] = c
	se.cmds = append(se.cmds, c)
	s.mu.Unlock()
	go c.pump("stdout", proc.Stdout())
	go c.pump("stderr", proc.Stderr())
	go c.reap()
	if body.Timeout != nil && *body.Timeout > 0 {
		t := time.AfterFunc(time.Duration(*body.Timeout)*time.Millisecond, func() { _ = syscall.Kill(-proc.PID(), syscall.SIGKILL) })
		go func() { <-c.finished; t.Stop() }()
	}
	if !body.Wait {
		fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"command": c.json(false)})
		return
	}
	// wait: the command, its logs (logs=true), then the finished command.
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	_ = enc.Encode(map[string]any{"command": c.json(false)})
	fl.Flush()
	if body.Logs {
		if !c.follow(w, r, enc, fl) {
			return
		}
	} else {
		select {
		case <-c.finished:
		case <-r.Context().Done():
			return
		}
	}
	<-c.finished
	_ = enc.Encode(map[string]any{"command": c.json(true)})
	fl.Flush()
}

func (s *Server) cmd(w http.ResponseWriter, r *http.Request, se *session) *command {
	s.mu.Lock()
	c := s.commands[r.PathValue("cmd")]
	s.mu.Unlock()
	if c == nil || c.sid != se.id {
		apiError(w, http.StatusNotFound, "not_found", "Command not found: %s", r.PathValue("cmd"))
		return nil
	}
	return c
}

func (s *Server) getCommand(w http.ResponseWriter, r *http.Request, se *session) {
	c := s.cmd(w, r, se)
	if c == nil {
		return
	}
	if r.URL.Query().Get("wait") == "true" {
		select {
		case <-c.finished:
		case <-r.Context().Done():
			return
		}
		fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"command": c.json(true)})
		return
	}
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"command": c.json(true)})
}

func (s *Server) logs(w http.ResponseWriter, r *http.Request, se *session) {
	c := s.cmd(w, r, se)
	if c == nil {
		return
	}
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	if c.follow(w, r, json.NewEncoder(w), fl) {
		return
	}
}

// kill signals the command's one pid (the API's kill), with the signal
// number the body carries.
func (s *Server) kill(w http.ResponseWriter, r *http.Request, se *session) {
	c := s.cmd(w, r, se)
	if c == nil {
		return
	}
	var body struct {
		Signal int `json:"signal"`
	}
	if err := fakecloud.DecodeJSON(r, &body); err != nil || body.Signal <= 0 || body.Signal > 64 {
		apiError(w, http.StatusBadRequest, "bad_request", "signal must be a signal number")
		return
	}
	if err := c.proc.Signal(syscall.Signal(body.Signal)); err != nil {
		apiError(w, http.StatusInternalServerError, "internal_error", "%v", err)
		return
	}
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"command": c.json(true)})
}
