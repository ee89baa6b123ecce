package blaxelfake

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
)

// killedMarker is what the sandbox-api writes into a killed process's
// stdout.
const killedMarker = "\n[Process is being forcefully killed]\n"

// proc is one process of the sandbox-api.
type proc struct {
	name, pid, command, dir string
	p                       *fakecloud.Proc
	started                 time.Time

	mu        sync.Mutex
	events    []event
	stdout    tail
	stderr    tail
	logs      tail
	changed   chan struct{}
	finished  bool
	status    string
	exitCode  int
	completed time.Time
}

type event struct{ typ, data string }

// maxTail is what the sandbox-api keeps of each stream in memory (its
// logBuffer): the record's stdout, stderr and logs are the last 64 KiB.
const maxTail = 64 << 10

// tail keeps the last maxTail bytes written to it.
type tail struct{ b []byte }

func (t *tail) WriteString(s string) {
	t.b = append(t.b, s...)
	if len(t.b) > 4*maxTail { // trimmed now and then, not on every write
		t.b = append(t.b[:0], t.b[len(t.b)-maxTail:]...)
	}
}

func (t *tail) String() string { return string(t.b[max(0, len(t.b)-maxTail):]) }

func (p *proc) add(typ, data string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, event{typ, data})
	if typ == "stdout" {
		p.stdout.WriteString(data)
	} else {
		p.stderr.WriteString(data)
	}
	p.logs.WriteString(data)
	close(p.changed)
	p.changed = make(chan struct{})
}

// pump reads one pipe into events.
func (p *proc) pump(r io.Reader, typ string, last chan<- time.Time, eof chan<- struct{}) {
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			p.add(typ, string(buf[:n]))
			select {
			case last <- time.Now():
			default:
			}
		}
		if err != nil {
			close(eof)
			return
		}
	}
}

// watch ends the process record once the shell exited and its output
// drained: both pipes at EOF, or no output for a moment (a background
// child that keeps the pipe holds no more of the shell's output, as the
// real sandbox-api, which reads files, stops reading when the shell ends).
func (p *proc) watch() {
	last := make(chan time.Time, 1)
	e1, e2 := make(chan struct{}), make(chan struct{})
	go p.pump(p.p.Stdout(), "stdout", last, e1)
	go p.pump(p.p.Stderr(), "stderr", last, e2)
	<-p.p.Done()
	idle := time.NewTimer(150 * time.Millisecond)
	for drained := false; !drained; {
		select {
		case <-e1:
			e1 = nil
			if e2 == nil {
				drained = true
			}
		case <-e2:
			e2 = nil
			if e1 == nil {
				drained = true
			}
		case <-last:
			idle.Reset(150 * time.Millisecond)
		case <-idle.C:
			drained = true
		}
	}
	idle.Stop()
	p.mu.Lock()
	p.finished, p.exitCode, p.completed = true, p.p.ExitCode(), time.Now().UTC()
	if p.status == "running" {
		p.status = "completed"
		if p.exitCode != 0 {
			p.status = "failed"
		}
	}
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// response is the ProcessResponse JSON.
func (p *proc) response() map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]any{"name": p.name, "pid": p.pid, "command": p.command, "workingDir": p.dir, "status": p.status,
		"startedAt": p.started.Format(time.RFC3339), "completedAt": "", "exitCode": 0,
		"stdout": p.stdout.String(), "stderr": p.stderr.String(), "logs": p.logs.String()}
	if p.finished {
		out["completedAt"] = p.completed.Format(time.RFC3339)
		out["exitCode"] = p.exitCode
	}
	return out
}

func (s *Server) startProcess(w http.ResponseWriter, r *http.Request) {
	b, ok := s.lookup(w, r, true)
	if !ok {
		return
	}
	var req struct {
		Command           string            `json:"command"`
		Env               map[string]string `json:"env"`
		Name              string            `json:"name"`
		WorkingDir        string            `json:"workingDir"`
		WaitForCompletion bool              `json:"waitForCompletion"`
		KeepAlive         bool              `json:"keepAlive"`
		Timeout           *int              `json:"timeout"`
		WaitForPorts      []int             `json:"waitForPorts"`
		RestartOnFailure  bool              `json:"restartOnFailure"`
		MaxRestarts       int               `json:"maxRestarts"`
	}
	if err := fakecloud.DecodeJSON(r, &req); err != nil {
		s.fail(w, true, http.StatusBadRequest, "", err.Error())
		return
	}
	if req.Command == "" {
		s.fail(w, true, http.StatusBadRequest, "", "command is required")
		return
	}
	dir := req.WorkingDir
	if dir == "" {
		dir = b.sb.Root
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		s.fail(w, true, http.StatusUnprocessableEntity, "", "could not execute command '"+req.Command+"' because folder '"+dir+"' does not exist")
		return
	}
	b.pmu.Lock()
	if req.Name != "" {
		if old, ok := b.procs[req.Name]; ok {
			old.mu.Lock()
			running := old.status == "running"
			old.mu.Unlock()
			if running {
				b.pmu.Unlock()
				s.fail(w, true, http.StatusBadRequest, "", "process with name '"+req.Name+"' already exists and is running")
				return
			}
		}
	} else {
		req.Name = "proc-" + randomHex(4)
	}
	env := make([]string, 0, len(req.Env))
	for k, v := range req.Env {
		env = append(env, k+"="+v)
	}
	fp, err := b.sb.Start(fakecloud.Spec{Argv: []string{"sh", "-c", req.Command}, Env: env, Dir: dir})
	if err != nil {
		b.pmu.Unlock()
		s.fail(w, true, http.StatusUnprocessableEntity, "", err.Error())
		return
	}
	p := &proc{name: req.Name, pid: strconv.Itoa(fp.PID()), command: req.Command, dir: dir, p: fp, started: time.Now().UTC(),
		changed: make(chan struct{}), status: "running"}
	b.procs[p.name], b.procs[p.pid] = p, p
	b.pmu.Unlock()
	go p.watch()

	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		s.streamEvents(w, r, p, func(e event) []byte {
			line, _ := json.Marshal(map[string]string{"type": e.typ, "data": e.data})
			return append(line, '\n')
		})
		res, _ := json.Marshal(p.response())
		line, _ := json.Marshal(map[string]string{"type": "result", "data": string(res)})
		_, _ = w.Write(append(line, '\n'))
		return
	}
	if req.WaitForCompletion {
		for {
			p.mu.Lock()
			done, ch := p.finished, p.changed
			p.mu.Unlock()
			if done {
				break
			}
			select {
			case <-ch:
			case <-r.Context().Done():
				return
			}
		}
	}
	fakecloud.WriteJSON(w, http.StatusOK, p.response())
}

// streamEvents writes the process's output events, from the first, until
// it has finished (or the client goes, or a DropAfter fault ends the
// socket).
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, p *proc, format func(event) []byte) {
	fl, _ := w.(http.Flusher)
	dropAfter, drop := fakecloud.StreamFault(r.Context())
	sent := 0
	for i := 0; ; {
		p.mu.Lock()
		evs := p.events[i:]
		i = len(p.events)
		done, ch := p.finished, p.changed
		p.mu.Unlock()
		for _, e := range evs {
			if _, err := w.Write(format(e)); err != nil {
				return
			}
			sent += len(e.data)
			if drop && sent >= dropAfter {
				if fl != nil {
					fl.Flush()
				}
				fakecloud.NoteDrop(r.Context())
				if hj, ok := w.(http.Hijacker); ok {
					if c, _, err := hj.Hijack(); err == nil {
						_ = c.Close()
					}
				}
				panic(http.ErrAbortHandler)
			}
		}
		if fl != nil {
			fl.Flush()
		}
		if done && len(evs) == 0 {
			return
		}
		if done {
			continue
		}
		select {
		case <-ch:
		case <-r.Context().Done():
			return
		}
	}
}

func (s *Server) findProc(w http.ResponseWriter, r *http.Request) (*proc, bool) {
	b, ok := s.lookup(w, r, true)
	if !ok {
		return nil, false
	}
	id := r.PathValue("id")
	b.pmu.Lock()
	p, ok := b.procs[id]
	b.pmu.Unlock()
	if !ok {
		s.fail(w, true, http.StatusNotFound, "", "process with Identifier "+id+" not found")
	}
	return p, ok
}

func (s *Server) getProcess(w http.ResponseWriter, r *http.Request) {
	if p, ok := s.findProc(w, r); ok {
		fakecloud.WriteJSON(w, http.StatusOK, p.response())
	}
}

func (s *Server) processLogs(w http.ResponseWriter, r *http.Request) {
	p, ok := s.findProc(w, r)
	if !ok {
		return
	}
	res := p.response()
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"logs": res["logs"], "stdout": res["stdout"], "stderr": res["stderr"]})
}

// processStream is GET …/logs/stream: text lines prefixed "stdout:" or
// "stderr:".
func (s *Server) processStream(w http.ResponseWriter, r *http.Request) {
	p, ok := s.findProc(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	s.streamEvents(w, r, p, func(e event) []byte {
		var out []byte
		for _, line := range strings.SplitAfter(e.data, "\n") {
			if line != "" {
				out = append(out, e.typ+":"+line...)
			}
		}
		return out
	})
}

func (s *Server) signal(w http.ResponseWriter, r *http.Request, sig syscall.Signal, status, msg string) {
	p, ok := s.findProc(w, r)
	if !ok {
		return
	}
	p.mu.Lock()
	finished := p.finished
	p.mu.Unlock()
	if sig == syscall.SIGKILL && !finished {
		p.add("stdout", killedMarker)
	}
	// The status is set before the signal: the process may end, and its
	// waiter record it as failed, before a status set afterwards.
	p.mu.Lock()
	if !p.finished {
		p.status = status
	}
	p.mu.Unlock()
	_ = p.p.Signal(sig)
	fakecloud.WriteJSON(w, http.StatusOK, map[string]string{"message": msg})
}

func (s *Server) killProcess(w http.ResponseWriter, r *http.Request) {
	s.signal(w, r, syscall.SIGKILL, "killed", "Process killed successfully")
}

func (s *Server) stopProcess(w http.ResponseWriter, r *http.Request) {
	s.signal(w, r, syscall.SIGTERM, "stopped", "Process stopped successfully")
}

// fsPath maps a sandbox path to the host: the fake's sandboxes are host
// directories, so paths are host paths (corral's workspace is under the
// sandbox's home).
func fsPath(r *http.Request) string { return filepath.Clean(cleanPath(r.PathValue("path"))) }

func fileJSON(path string, st fs.FileInfo) map[string]any {
	return map[string]any{"name": st.Name(), "path": path, "size": st.Size(), "permissions": st.Mode().Perm().String(),
		"lastModified": st.ModTime().UTC().Format(time.RFC3339), "owner": "root", "group": "root"}
}

func (s *Server) fsGet(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.lookup(w, r, true); !ok {
		return
	}
	path := fsPath(r)
	st, err := os.Stat(path)
	if err != nil {
		s.fail(w, true, http.StatusNotFound, "", "file not found: "+path)
		return
	}
	if st.IsDir() {
		ents, err := os.ReadDir(path)
		if err != nil {
			s.fail(w, true, http.StatusUnprocessableEntity, "", err.Error())
			return
		}
		files, subs := []map[string]any{}, []map[string]any{}
		for _, e := range ents {
			p := filepath.Join(path, e.Name())
			if e.IsDir() {
				subs = append(subs, map[string]any{"name": e.Name(), "path": p})
				continue
			}
			if fi, err := e.Info(); err == nil {
				files = append(files, fileJSON(p, fi))
			}
		}
		fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"name": st.Name(), "path": path, "files": files, "subdirectories": subs})
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		s.fail(w, true, http.StatusUnprocessableEntity, "", err.Error())
		return
	}
	if strings.Contains(r.Header.Get("Accept"), "application/octet-stream") {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(data)
		return
	}
	out := fileJSON(path, st)
	out["content"] = string(data)
	fakecloud.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) fsPut(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.lookup(w, r, true); !ok {
		return
	}
	path := fsPath(r)
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var data []byte
	if ct == "multipart/form-data" {
		// node's fetch (undici, as @blaxel/core 0.3.21 drives it) can send a
		// Content-Type whose boundary is not the body's: the body's first
		// line is taken as the boundary, as a lenient parser would.
		raw, _ := io.ReadAll(r.Body)
		boundary := params["boundary"]
		if first, _, ok := bytes.Cut(raw, []byte("\r\n")); ok && bytes.HasPrefix(first, []byte("--")) {
			boundary = string(first[2:])
		}
		mr := multipart.NewReader(bytes.NewReader(raw), boundary)
		for {
			part, err := mr.NextPart()
			if err != nil {
				break
			}
			if part.FormName() == "file" {
				data, _ = io.ReadAll(part)
			}
		}
	} else {
		var req struct {
			Content     *string `json:"content"`
			IsDirectory bool    `json:"isDirectory"`
			Permissions string  `json:"permissions"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			s.fail(w, true, http.StatusBadRequest, "", "bad JSON body: "+err.Error())
			return
		}
		if req.IsDirectory {
			if err := os.MkdirAll(path, 0o755); err != nil {
				s.fail(w, true, http.StatusUnprocessableEntity, "", err.Error())
				return
			}
			fakecloud.WriteJSON(w, http.StatusOK, map[string]string{"message": "Directory created successfully", "path": path})
			return
		}
		if req.Content != nil {
			data = []byte(*req.Content)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
		err = os.WriteFile(path, data, 0o644)
		if err == nil {
			fakecloud.WriteJSON(w, http.StatusOK, map[string]string{"message": "File created successfully", "path": path})
			return
		}
		s.fail(w, true, http.StatusUnprocessableEntity, "", err.Error())
		return
	}
	s.fail(w, true, http.StatusUnprocessableEntity, "", "cannot make the parent of "+path)
}

func (s *Server) fsDelete(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.lookup(w, r, true); !ok {
		return
	}
	path := fsPath(r)
	var err error
	if r.URL.Query().Get("recursive") == "true" {
		if _, serr := os.Lstat(path); serr != nil {
			err = serr
		} else {
			err = os.RemoveAll(path)
		}
	} else {
		err = os.Remove(path)
	}
	if errors.Is(err, fs.ErrNotExist) {
		s.fail(w, true, http.StatusNotFound, "", "file not found: "+path)
		return
	}
	if err != nil {
		s.fail(w, true, http.StatusUnprocessableEntity, "", err.Error())
		return
	}
	fakecloud.WriteJSON(w, http.StatusOK, map[string]string{"message": "Deleted successfully", "path": path})
}
