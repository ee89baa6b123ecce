package daytonafake

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/d10ffeed/corral/internal/fakecloud"
)

// The daemon's stream markers.
var (
	stdoutPrefix = []byte{1, 1, 1}
	stderrPrefix = []byte{2, 2, 2}
)

// session is one long-running shell that runs commands one at a time.
type session struct {
	id    string
	dir   string // its command directories
	shell *fakecloud.Proc

	mu       sync.Mutex
	commands map[string]*command
	order    []string
	gone     bool
}

// command is one command written to a session's shell.
type command struct {
	id, text string
	dir      string
	input    *os.File // the stdin FIFO, held open read-write as the daemon does

	mu      sync.Mutex
	log     []byte
	exit    *int
	changed chan struct{} // closed and replaced on every change
}

func (c *command) notify() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *command) append(prefix, b []byte) {
	c.mu.Lock()
	c.log = append(append(c.log, prefix...), b...)
	c.notify()
	c.mu.Unlock()
}

func daemonError(w http.ResponseWriter, status int, code, format string, args ...any) {
	fakecloud.WriteJSON(w, status, map[string]any{
		"statusCode": status, "message": fmt.Sprintf(format, args...), "code": code, "source": "DAYTONA_DAEMON",
		"timestamp": time.Now().UTC().Format(time.RFC3339Nano),
	})
}

func (s *Server) toolboxRoutes() {
	p := "/toolbox/{sid}"
	s.Handle("execute", "POST "+p+"/process/execute", s.execute)
	s.Handle("sessionCreate", "POST "+p+"/process/session", s.sessionCreate)
	s.Handle("sessionGet", "GET "+p+"/process/session/{session}", s.sessionGet)
	s.Handle("sessionDelete", "DELETE "+p+"/process/session/{session}", s.sessionDelete)
	s.Handle("sessionExec", "POST "+p+"/process/session/{session}/exec", s.sessionExec)
	s.Handle("command", "GET "+p+"/process/session/{session}/command/{cmd}", s.commandGet)
	s.Handle("logs", "GET "+p+"/process/session/{session}/command/{cmd}/logs", s.logs)
	s.Handle("input", "POST "+p+"/process/session/{session}/command/{cmd}/input", s.input)
	s.Handle("workDir", "GET "+p+"/work-dir", s.workDir)
	s.Handle("homeDir", "GET "+p+"/user-home-dir", s.homeDir)
	s.filesRoutes(p)
}

func (s *Server) workDir(w http.ResponseWriter, r *http.Request) {
	if d, ok := s.running(w, r); ok {
		fakecloud.WriteJSON(w, http.StatusOK, map[string]string{"dir": d.sb.Dir})
	}
}

func (s *Server) homeDir(w http.ResponseWriter, r *http.Request) {
	if d, ok := s.running(w, r); ok {
		fakecloud.WriteJSON(w, http.StatusOK, map[string]string{"dir": d.sb.Home})
	}
}

// execute is process/execute: sh -c command, one combined output.
func (s *Server) execute(w http.ResponseWriter, r *http.Request) {
	d, ok := s.running(w, r)
	if !ok {
		return
	}
	var req struct {
		Command string            `json:"command"`
		Cwd     string            `json:"cwd"`
		Envs    map[string]string `json:"envs"`
		Timeout *int              `json:"timeout"`
	}
	if err := fakecloud.DecodeJSON(r, &req); err != nil || strings.TrimSpace(req.Command) == "" {
		daemonError(w, http.StatusBadRequest, "BAD_REQUEST", "command is required")
		return
	}
	var env []string
	for k, v := range req.Envs {
		env = append(env, k+"="+v)
	}
	// One pipe for both streams, as the daemon's combined output.
	p, err := d.sb.Start(fakecloud.Spec{Argv: []string{"sh", "-c", "exec 2>&1\n" + req.Command}, Env: env, Dir: req.Cwd})
	if err != nil {
		daemonError(w, http.StatusBadRequest, "BAD_REQUEST", "%v", err)
		return
	}
	defer p.Release()
	var mu sync.Mutex
	var out bytes.Buffer
	var wg sync.WaitGroup
	for _, rd := range []io.Reader{p.Stdout(), p.Stderr()} {
		wg.Go(func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := rd.Read(buf)
				mu.Lock()
				out.Write(buf[:n])
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	timeout := 10 * time.Minute
	if req.Timeout != nil && *req.Timeout > 0 {
		timeout = time.Duration(*req.Timeout) * time.Second
	}
	select {
	case <-p.Done():
	case <-time.After(timeout):
		_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
		<-p.Done()
	case <-r.Context().Done():
		_ = syscall.Kill(-p.PID(), syscall.SIGKILL)
		<-p.Done()
		return
	}
	wg.Wait()
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"exitCode": p.ExitCode(), "result": out.String()})
}

func (s *Server) sessionCreate(w http.ResponseWriter, r *http.Request) {
	d, ok := s.running(w, r)
	if !ok {
		return
	}
	var req struct {
		SessionID string `json:"sessionId"`
	}
	if err := fakecloud.DecodeJSON(r, &req); err != nil || req.SessionID == "" || strings.ContainsAny(req.SessionID, "/\\") {
		daemonError(w, http.StatusBadRequest, "BAD_REQUEST", "invalid request body: sessionId is required")
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.sessions[req.SessionID]; ok {
		daemonError(w, http.StatusConflict, "CONFLICT", "session already exists")
		return
	}
	dir := filepath.Join(d.sb.Dir, ".daytona", "sessions", req.SessionID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		daemonError(w, http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "%v", err)
		return
	}
	sh, err := d.sb.Start(fakecloud.Spec{Argv: []string{"sh"}, Stdin: true, Dir: d.sb.Dir})
	if err != nil {
		daemonError(w, http.StatusInternalServerError, "INTERNAL_SERVER_ERROR", "%v", err)
		return
	}
	go func() { _, _ = io.Copy(io.Discard, sh.Stdout()) }()
	go func() { _, _ = io.Copy(io.Discard, sh.Stderr()) }()
	d.sessions[req.SessionID] = &session{id: req.SessionID, dir: dir, shell: sh, commands: map[string]*command{}}
	w.WriteHeader(http.StatusCreated)
}

func (s *Server) session(w http.ResponseWriter, r *http.Request) (*sandbox, *session, bool) {
	d, ok := s.running(w, r)
	if !ok {
		return nil, nil, false
	}
	d.mu.Lock()
	se, ok := d.sessions[r.PathValue("session")]
	d.mu.Unlock()
	if !ok {
		daemonError(w, http.StatusNotFound, "NOT_FOUND", "session not found")
		return nil, nil, false
	}
	return d, se, true
}

func (se *session) dtoCommand(c *command) map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]any{"id": c.id, "command": c.text}
	if c.exit != nil {
		m["exitCode"] = *c.exit
	}
	return m
}

func (s *Server) sessionGet(w http.ResponseWriter, r *http.Request) {
	_, se, ok := s.session(w, r)
	if !ok {
		return
	}
	se.mu.Lock()
	ids := append([]string(nil), se.order...)
	se.mu.Unlock()
	cmds := []map[string]any{}
	for _, id := range ids {
		se.mu.Lock()
		c := se.commands[id]
		se.mu.Unlock()
		cmds = append(cmds, se.dtoCommand(c))
	}
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"sessionId": se.id, "commands": cmds})
}

// kill ends the session the way the daemon does: its shell is killed
// (SIGKILL to the shell's pid; a command that made its own session runs
// on), its directory removed.
func (se *session) kill() {
	se.mu.Lock()
	if se.gone {
		se.mu.Unlock()
		return
	}
	se.gone = true
	cmds := make([]*command, 0, len(se.commands))
	for _, c := range se.commands {
		cmds = append(cmds, c)
	}
	se.mu.Unlock()
	if pid := se.shell.PID(); pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	se.shell.CloseStdin()
	for _, c := range cmds {
		if c.input != nil {
			_ = c.input.Close()
		}
	}
	_ = os.RemoveAll(se.dir)
}

func (d *sandbox) killSessions() {
	d.mu.Lock()
	all := make([]*session, 0, len(d.sessions))
	for _, se := range d.sessions {
		all = append(all, se)
	}
	d.sessions = map[string]*session{}
	d.mu.Unlock()
	for _, se := range all {
		se.kill()
	}
}

func (s *Server) sessionDelete(w http.ResponseWriter, r *http.Request) {
	d, se, ok := s.session(w, r)
	if !ok {
		return
	}
	d.mu.Lock()
	delete(d.sessions, se.id)
	d.mu.Unlock()
	se.kill()
	w.WriteHeader(http.StatusNoContent)
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	h := hex.EncodeToString(b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// shq quotes s for sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// sessionExec writes the command to the session's shell: it is sourced
// there with its output on two FIFOs the fake labels into the log, stdin
// on a third FIFO held open, and its status written to a file once the
// output drained.
func (s *Server) sessionExec(w http.ResponseWriter, r *http.Request) {
	_, se, ok := s.session(w, r)
	if !ok {
		return
	}
	var req struct {
		Command           string `json:"command"`
		RunAsync          bool   `json:"runAsync"`
		Async             bool   `json:"async"`
		SuppressInputEcho bool   `json:"suppressInputEcho"`
	}
	if err := fakecloud.DecodeJSON(r, &req); err != nil {
		daemonError(w, http.StatusBadRequest, "BAD_REQUEST", "invalid request body: %v", err)
		return
	}
	if strings.TrimSpace(req.Command) == "" {
		daemonError(w, http.StatusBadRequest, "BAD_REQUEST", "command cannot be empty")
		return
	}
	async := req.RunAsync || req.Async
	c := &command{id: newID(), text: req.Command, changed: make(chan struct{})}
	c.dir = filepath.Join(se.dir, c.id)
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		daemonError(w, http.StatusBadRequest, "BAD_REQUEST", "failed to create log directory: %v", err)
		return
	}
	cmdFile := filepath.Join(c.dir, "cmd.sh")
	out, errp, in, exit := filepath.Join(c.dir, "stdout.pipe"), filepath.Join(c.dir, "stderr.pipe"), filepath.Join(c.dir, "input.pipe"), filepath.Join(c.dir, "exit_code")
	if err := os.WriteFile(cmdFile, []byte(req.Command+"\n"), 0o600); err != nil {
		daemonError(w, http.StatusBadRequest, "BAD_REQUEST", "failed to write command file: %v", err)
		return
	}
	for _, f := range []string{out, errp, in} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			daemonError(w, http.StatusBadRequest, "BAD_REQUEST", "mkfifo: %v", err)
			return
		}
	}
	stdin := "< /dev/null"
	if async {
		f, err := os.OpenFile(in, os.O_RDWR, 0)
		if err != nil {
			daemonError(w, http.StatusBadRequest, "BAD_REQUEST", "%v", err)
			return
		}
		c.input = f
		stdin = "<> " + shq(in)
	}
	se.mu.Lock()
	if se.gone {
		se.mu.Unlock()
		daemonError(w, http.StatusGone, "SESSION_ENDED", "session is no longer accepting commands")
		return
	}
	se.commands[c.id] = c
	se.order = append(se.order, c.id)
	se.mu.Unlock()

	var drained sync.WaitGroup
	for _, st := range []struct {
		path   string
		prefix []byte
	}{{out, stdoutPrefix}, {errp, stderrPrefix}} {
		drained.Go(func() {
			f, err := os.Open(st.path) // blocks until the shell opens the writer
			if err != nil {
				return
			}
			defer f.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := f.Read(buf)
				if n > 0 {
					c.append(st.prefix, append([]byte(nil), buf[:n]...))
				}
				if err != nil {
					return
				}
			}
		})
	}
	// The EXIT trap records the status of a command that exits the
	// session's shell (an "exit" in the sourced text), as the daemon does.
	publish := fmt.Sprintf(`echo "$_ec" > %s.pending && mv -f %s.pending %s`, shq(exit), shq(exit), shq(exit))
	line := fmt.Sprintf("trap %s EXIT; { . %s; } %s > %s 2> %s; _ec=$?; %s; trap - EXIT\n",
		shq("_ec=$?; exec >/dev/null 2>&1; "+publish), shq(cmdFile), stdin, shq(out), shq(errp), publish)
	if _, err := se.shell.WriteStdin([]byte(line)); err != nil {
		daemonError(w, http.StatusGone, "SESSION_ENDED", "failed to write command: %v", err)
		return
	}
	go func() {
		drained.Wait()
		for {
			if b, err := os.ReadFile(exit); err == nil {
				code, err := strconv.Atoi(strings.TrimSpace(string(b)))
				if err == nil {
					c.mu.Lock()
					c.exit = &code
					c.notify()
					c.mu.Unlock()
					if c.input != nil {
						_ = c.input.Close()
					}
					return
				}
			}
			se.mu.Lock()
			gone := se.gone
			se.mu.Unlock()
			if gone || se.shell.Exited() {
				code := -1
				c.mu.Lock()
				c.exit = &code
				c.notify()
				c.mu.Unlock()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	if async {
		fakecloud.WriteJSON(w, http.StatusAccepted, map[string]any{"cmdId": c.id})
		return
	}
	for {
		c.mu.Lock()
		ch, code, log := c.changed, c.exit, append([]byte(nil), c.log...)
		c.mu.Unlock()
		if code != nil {
			// As the daemon: a client that names no SDK version gets one
			// combined output unless it sends X-Daytona-Split-Output: true,
			// then the labelled log; stdout and stderr apart only for an
			// SDK from 0.167.0 on.
			sdk := r.Header.Get("X-Daytona-SDK-Version")
			body := map[string]any{"cmdId": c.id, "exitCode": *code}
			switch {
			case (sdk != "" && versionBelow(sdk, 0, 27)) || (sdk == "" && r.Header.Get("X-Daytona-Split-Output") != "true"):
				body["output"] = string(bytes.ReplaceAll(bytes.ReplaceAll(log, stdoutPrefix, nil), stderrPrefix, nil))
			default:
				body["output"] = string(log)
				if sdk != "" && !versionBelow(sdk, 0, 167) {
					so, se := demux(log)
					body["stdout"], body["stderr"] = string(so), string(se)
				}
			}
			fakecloud.WriteJSON(w, http.StatusOK, body)
			return
		}
		select {
		case <-ch:
		case <-r.Context().Done():
			return
		}
	}
}

// demux splits a labelled log into its streams.
func demux(log []byte) (stdout, stderr []byte) {
	var cur *[]byte
	for i := 0; i < len(log); {
		if i+3 <= len(log) && bytes.Equal(log[i:i+3], stdoutPrefix) {
			cur, i = &stdout, i+3
			continue
		}
		if i+3 <= len(log) && bytes.Equal(log[i:i+3], stderrPrefix) {
			cur, i = &stderr, i+3
			continue
		}
		if cur != nil {
			*cur = append(*cur, log[i])
		}
		i++
	}
	return stdout, stderr
}

func (s *Server) command(w http.ResponseWriter, r *http.Request) (*session, *command, bool) {
	_, se, ok := s.session(w, r)
	if !ok {
		return nil, nil, false
	}
	se.mu.Lock()
	c, ok := se.commands[r.PathValue("cmd")]
	se.mu.Unlock()
	if !ok {
		daemonError(w, http.StatusNotFound, "NOT_FOUND", "command not found")
		return nil, nil, false
	}
	return se, c, true
}

func (s *Server) commandGet(w http.ResponseWriter, r *http.Request) {
	if se, c, ok := s.command(w, r); ok {
		fakecloud.WriteJSON(w, http.StatusOK, se.dtoCommand(c))
	}
}

// logs answers the command's log: JSON {output, stdout, stderr} over
// HTTP, or over a WebSocket with follow=true binary messages of the
// labelled log until the command ended, then a normal closure.
func (s *Server) logs(w http.ResponseWriter, r *http.Request) {
	_, c, ok := s.command(w, r)
	if !ok {
		return
	}
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		c.mu.Lock()
		log := append([]byte(nil), c.log...)
		c.mu.Unlock()
		so, se := demux(log)
		fakecloud.WriteJSON(w, http.StatusOK, map[string]string{
			"output": string(bytes.ReplaceAll(bytes.ReplaceAll(log, stdoutPrefix, nil), stderrPrefix, nil)),
			"stdout": string(so), "stderr": string(se)})
		return
	}
	follow := r.URL.Query().Get("follow") == "true"
	dropAfter, drop := fakecloud.StreamFault(r.Context())
	faultCtx := r.Context()
	var opts *websocket.AcceptOptions
	if v := r.Header.Get("Sec-WebSocket-Protocol"); v != "" {
		opts = &websocket.AcceptOptions{Subprotocols: strings.Split(strings.ReplaceAll(v, " ", ""), ",")}
	}
	conn, err := websocket.Accept(w, r, opts)
	if err != nil {
		return
	}
	defer conn.CloseNow()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the client's close (or a drop) ends the stream
		for {
			if _, _, err := conn.Read(ctx); err != nil {
				cancel()
				return
			}
		}
	}()
	sent := 0
	for {
		c.mu.Lock()
		ch, done, chunk := c.changed, c.exit != nil, append([]byte(nil), c.log[sent:]...)
		c.mu.Unlock()
		for len(chunk) > 0 {
			n := min(len(chunk), 64<<10)
			if drop && sent+n >= dropAfter {
				if room := dropAfter - sent; room > 0 {
					_ = conn.Write(ctx, websocket.MessageBinary, chunk[:room])
				}
				fakecloud.NoteDrop(faultCtx)
				return
			}
			if err := conn.Write(ctx, websocket.MessageBinary, chunk[:n]); err != nil {
				return
			}
			sent += n
			chunk = chunk[n:]
		}
		if done || !follow {
			_ = conn.Close(websocket.StatusNormalClosure, "")
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

// input writes data to the command's stdin FIFO.
func (s *Server) input(w http.ResponseWriter, r *http.Request) {
	_, c, ok := s.command(w, r)
	if !ok {
		return
	}
	var req struct {
		Data string `json:"data"`
	}
	if err := fakecloud.DecodeJSON(r, &req); err != nil {
		daemonError(w, http.StatusBadRequest, "BAD_REQUEST", "invalid request body: %v", err)
		return
	}
	c.mu.Lock()
	done := c.exit != nil
	c.mu.Unlock()
	if done || c.input == nil {
		daemonError(w, http.StatusGone, "COMMAND_ALREADY_COMPLETED", "command has already completed")
		return
	}
	if _, err := c.input.Write([]byte(req.Data)); err != nil {
		daemonError(w, http.StatusGone, "COMMAND_ALREADY_COMPLETED", "writing input: %v", err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// versionBelow reports whether the semantic version v is below
// major.minor (an unparsable version counts as below).
func versionBelow(v string, major, minor int) bool {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return true
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return true
	}
	return ma < major || ma == major && mi < minor
}
