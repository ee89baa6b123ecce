// Package cloudflarefake is a loopback fake of corral's Cloudflare bridge
// Worker (provider/cloudflare/bridge), built from internal/fakecloud: the
// bridge API its README specifies — the same paths, JSON field names,
// error bodies, status codes and exec WebSocket messages — with the
// sandboxes real host processes.
//
// It imitates what the bridge does with the Cloudflare SDK: a sandbox's id
// is the Durable Object name the client chose (unique, 409 when taken);
// every command starts as a session leader (the bridge wraps it in
// setsid), so a kill script reaches its group; standard input is buffered
// until eof and only then is the command started (the SDK's exec takes no
// stdin); a command goes on running when its WebSocket drops (Workers RPC
// cannot forward an abort); env (setEnvVars) is kept per sandbox and laid
// under every later command's environment; there is no process table to
// ask for an exit code.
//
// Routes (for faults and counts): health, create, list, get, delete, env,
// exec.
package cloudflarefake

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/provider/cloudflare"
)

// Server is the fake bridge.
type Server struct {
	*fakecloud.Server
	mu  sync.Mutex
	env map[string]map[string]string // by sandbox id: setEnvVars
}

// New starts the fake with the kit's options (Kill is always the group
// kill's semantics: the bridge's kill is a script that signals the group).
// The token is checked here rather than by the kit, so that a refusal
// carries the bridge's error body.
func New(opts fakecloud.Options) (*Server, error) {
	opts.Kill = fakecloud.GroupKill
	token := opts.Token
	opts.Token = ""
	s, err := fakecloud.New(opts)
	if err != nil {
		return nil, err
	}
	f := &Server{Server: s, env: map[string]map[string]string{}}
	auth := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			got := r.Header.Get("Authorization")
			if token != "" && subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+token)) != 1 {
				writeError(w, http.StatusUnauthorized, "unauthorized", "missing or bad bearer token")
				return
			}
			h(w, r)
		}
	}
	s.Handle("health", "GET /v1/health", auth(f.health))
	s.Handle("create", "POST /v1/sandboxes", auth(f.create))
	s.Handle("list", "GET /v1/sandboxes", auth(f.list))
	s.Handle("get", "GET /v1/sandboxes/{id}", auth(f.get))
	s.Handle("delete", "DELETE /v1/sandboxes/{id}", auth(f.delete))
	s.Handle("env", "POST /v1/sandboxes/{id}/env", auth(f.setEnv))
	s.Handle("exec", "GET /v1/sandboxes/{id}/exec", auth(f.exec))
	return f, nil
}

// writeError writes the bridge's error body.
func writeError(w http.ResponseWriter, status int, code, format string, args ...any) {
	fakecloud.WriteJSON(w, status, cloudflare.ErrorBody{Error: code, Message: fmt.Sprintf(format, args...), Status: status})
}

func wire(sb *fakecloud.Sandbox) cloudflare.Sandbox {
	labels := map[string]string{}
	for k, v := range sb.Labels {
		labels[k] = v
	}
	return cloudflare.Sandbox{ID: sb.Name, Labels: labels, Root: sb.Root, CreatedAt: sb.Created.UTC()}
}

// byID finds the sandbox whose Durable Object name is id.
func (f *Server) byID(id string) (*fakecloud.Sandbox, bool) {
	for _, sb := range f.Sandboxes(id, nil) {
		if sb.Name == id {
			return sb, true
		}
	}
	return nil, false
}

func (f *Server) health(w http.ResponseWriter, _ *http.Request) {
	fakecloud.WriteJSON(w, http.StatusOK, cloudflare.Health{OK: true, Bridge: "corral-cloudflare-bridge", Version: cloudflare.BridgeVersion})
}

func validID(id string) bool {
	return cloudflare.SandboxID(id) == id
}

func (f *Server) create(w http.ResponseWriter, r *http.Request) {
	var req cloudflare.CreateRequest
	if err := fakecloud.DecodeJSON(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "%v", err)
		return
	}
	if !validID(req.ID) {
		writeError(w, http.StatusBadRequest, "bad_request", `want {"id": 1-63 of a-z, 0-9 and -, "labels": {...}}`)
		return
	}
	sb, err := f.CreateSandbox(req.ID, req.Labels)
	switch {
	case errors.Is(err, fakecloud.ErrNameTaken):
		writeError(w, http.StatusConflict, "conflict", "sandbox %q exists", req.ID)
	case err != nil:
		writeError(w, http.StatusInternalServerError, "internal", "%v", err)
	default:
		fakecloud.WriteJSON(w, http.StatusCreated, wire(sb))
	}
}

func (f *Server) list(w http.ResponseWriter, r *http.Request) {
	labels := map[string]string{}
	for _, kv := range r.URL.Query()["label"] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			writeError(w, http.StatusBadRequest, "bad_request", "label filter %q is not K=V", kv)
			return
		}
		labels[k] = v
	}
	out := cloudflare.ListResponse{Sandboxes: []cloudflare.Sandbox{}}
	for _, sb := range f.Sandboxes("", labels) {
		out.Sandboxes = append(out.Sandboxes, wire(sb))
	}
	sort.Slice(out.Sandboxes, func(i, j int) bool { return out.Sandboxes[i].ID < out.Sandboxes[j].ID })
	fakecloud.WriteJSON(w, http.StatusOK, out)
}

func (f *Server) sandbox(w http.ResponseWriter, r *http.Request) (*fakecloud.Sandbox, bool) {
	sb, ok := f.byID(r.PathValue("id"))
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", "sandbox %q not found", r.PathValue("id"))
	}
	return sb, ok
}

func (f *Server) get(w http.ResponseWriter, r *http.Request) {
	if sb, ok := f.sandbox(w, r); ok {
		fakecloud.WriteJSON(w, http.StatusOK, wire(sb))
	}
}

func (f *Server) delete(w http.ResponseWriter, r *http.Request) {
	sb, ok := f.sandbox(w, r)
	if !ok {
		return
	}
	if _, err := f.DeleteSandbox(r.Context(), sb.ID); err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "%v", err)
		return
	}
	f.mu.Lock()
	delete(f.env, sb.Name)
	f.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (f *Server) setEnv(w http.ResponseWriter, r *http.Request) {
	sb, ok := f.sandbox(w, r)
	if !ok {
		return
	}
	var req cloudflare.EnvRequest
	if err := fakecloud.DecodeJSON(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "%v", err)
		return
	}
	f.mu.Lock()
	m := f.env[sb.Name]
	if m == nil {
		m = map[string]string{}
		f.env[sb.Name] = m
	}
	for k, v := range req.Env {
		m[k] = v
	}
	f.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// sandboxEnv is setEnvVars' environment, sorted, laid under a command's.
func (f *Server) sandboxEnv(id string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []string{}
	for k, v := range f.env[id] {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// SandboxEnv returns the environment setEnvVars gave sandbox id (for tests).
func (f *Server) SandboxEnv(id string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for k, v := range f.env[id] {
		out[k] = v
	}
	return out
}

// exec runs one command over a WebSocket, as the bridge does.
func (f *Server) exec(w http.ResponseWriter, r *http.Request) {
	sb, ok := f.sandbox(w, r)
	if !ok {
		return
	}
	dropAfter, drop := fakecloud.StreamFault(r.Context())
	faultCtx := r.Context()
	conn, err := fakecloud.AcceptWebSocket(w, r)
	if err != nil {
		return
	}
	defer conn.CloseNow()
	conn.SetReadLimit(1 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	send := func(m cloudflare.Message) error {
		b, _ := json.Marshal(m)
		return conn.Write(ctx, websocket.MessageText, b)
	}
	hctx, hcancel := context.WithTimeout(ctx, 30*time.Second)
	typ, data, err := conn.Read(hctx)
	hcancel()
	var start cloudflare.Message
	if err != nil || typ != websocket.MessageText || json.Unmarshal(data, &start) != nil || start.Type != "start" || len(start.Argv) == 0 {
		_ = send(cloudflare.Message{Type: "error", Status: http.StatusBadRequest, Message: "the first message must be a start message with argv"})
		return
	}
	if err := send(cloudflare.Message{Type: "started"}); err != nil {
		return
	}
	// Standard input: buffered until eof, then the command starts with it.
	var stdin []byte
	if start.Stdin {
		for {
			typ, data, err := conn.Read(ctx)
			if err != nil {
				return // gone before eof: the command never starts
			}
			if typ == websocket.MessageBinary && len(data) > 0 && data[0] == cloudflare.TagStdin {
				if len(stdin)+len(data)-1 > cloudflare.MaxStdin {
					_ = send(cloudflare.Message{Type: "error", Status: http.StatusRequestEntityTooLarge,
						Message: fmt.Sprintf("standard input over %d bytes", cloudflare.MaxStdin)})
					return
				}
				stdin = append(stdin, data[1:]...)
				continue
			}
			var m cloudflare.Message
			if typ == websocket.MessageText && json.Unmarshal(data, &m) == nil && m.Type == "eof" {
				break
			}
		}
	}
	env := append(f.sandboxEnv(sb.Name), start.Env...)
	p, err := sb.Start(fakecloud.Spec{Argv: start.Argv, Env: env, Dir: start.Dir, Stdin: start.Stdin})
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, fakecloud.ErrSandboxGone) {
			status = http.StatusNotFound
		}
		_ = send(cloudflare.Message{Type: "error", Status: status, Message: err.Error()})
		return
	}
	defer p.Release()
	if start.Stdin {
		go func() {
			_, _ = p.WriteStdin(stdin)
			p.CloseStdin()
		}()
	}

	var (
		gone    atomic.Bool
		sent    atomic.Int64
		dropMu  sync.Mutex
		dropped bool
	)
	// frame sends one output frame, or drops the socket once the injected
	// fault's byte budget is spent. The command runs on either way.
	frame := func(tag byte, b []byte) {
		if gone.Load() {
			return
		}
		if drop {
			dropMu.Lock()
			room := int64(dropAfter) - sent.Load()
			if int64(len(b)) >= room {
				if room > 0 {
					_ = conn.Write(ctx, websocket.MessageBinary, append([]byte{tag}, b[:room]...))
					sent.Add(room)
				}
				if !dropped {
					dropped = true
					fakecloud.NoteDrop(faultCtx)
				}
				dropMu.Unlock()
				gone.Store(true)
				conn.CloseNow()
				return
			}
			dropMu.Unlock()
		}
		if err := conn.Write(ctx, websocket.MessageBinary, append([]byte{tag}, b...)); err != nil {
			gone.Store(true)
			return
		}
		sent.Add(int64(len(b)))
	}
	var outs sync.WaitGroup
	for tag, rd := range map[byte]io.Reader{cloudflare.TagStdout: p.Stdout(), cloudflare.TagStderr: p.Stderr()} {
		outs.Go(func() {
			buf := make([]byte, cloudflare.MaxFrame)
			for {
				n, err := rd.Read(buf)
				if n > 0 {
					frame(tag, buf[:n])
				}
				if err != nil {
					return
				}
			}
		})
	}
	go func() {
		for {
			if _, _, err := conn.Read(ctx); err != nil {
				gone.Store(true)
				return
			}
		}
	}()
	outs.Wait()
	<-p.Done()
	if gone.Load() {
		return
	}
	code := p.ExitCode()
	if send(cloudflare.Message{Type: "exit", Code: &code}) == nil {
		_ = conn.Close(websocket.StatusNormalClosure, "")
	}
}
