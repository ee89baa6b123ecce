// Package spritesfake is a loopback fake of the Sprites API (Fly.io,
// api.sprites.dev) for tests: the REST routes and the exec WebSocket that
// corral's provider/sprites and the official @fly/sprites SDK use, with
// real host processes behind them (internal/fakecloud).
//
// What it serves, with the real API's paths, JSON field names and status
// codes (from the official SDKs, @fly/sprites 0.1.0 and sprites-go, and
// the API reference at sprites.dev/api):
//
//   - Sprites: POST /v1/sprites {name, url_settings, labels,
//     wait_for_capacity, …} (201; a taken name is 409), GET /v1/sprites
//     (prefix, max_results, continuation_token; {sprites, has_more,
//     next_continuation_token}), GET, PUT (url_settings, labels) and
//     DELETE (204; 404 when gone) /v1/sprites/{name}. A Sprite is named by
//     its name; its id is "sprite-<hex>".
//   - Exec: WSS /v1/sprites/{name}/exec?cmd=…&cmd=…&path=&dir=&env=K=V&
//     stdin=&max_run_after_disconnect=. The server sends session_info
//     (session_id = the process's pid), then binary frames (0x01 stdout,
//     0x02 stderr), and at the end the binary exit frame (0x03, code) and
//     the JSON exit message {exit_code}. The client sends 0x00 stdin frames
//     and 0x04 for EOF (only with stdin=true), or {type:signal}. env=
//     replaces the default environment: a default variable (PATH, HOME,
//     LANG) the request leaves out is empty, so a command loses PATH as on
//     the real service. A missing dir is 400.
//   - Sessions: GET /v1/sprites/{name}/exec lists them; POST
//     /v1/sprites/{name}/exec/{id}/kill?signal=&timeout= signals the
//     session's process group, escalates to SIGKILL after timeout, and
//     streams NDJSON events (signal, timeout, exited, complete). A
//     non-TTY session whose client disconnects runs on for
//     max_run_after_disconnect (default 10s; 0 is forever), then its group
//     is killed.
//   - Files: GET fs/read, PUT fs/write (mkdirParents, mode), GET fs/list
//     ({entries:[{name,path,isDir,size,mode,modTime,type}]}), DELETE
//     fs/delete, POST fs/rename, with path and workingDir; errors are
//     {error, code: ENOENT…, path}. Paths are the host's (the fake's
//     processes are host processes) and must stay inside the Sprite's
//     directory.
//   - Checkpoints: POST /v1/sprites/{name}/checkpoint {comment} (NDJSON
//     progress, the new version "vN"), GET …/checkpoints, GET
//     …/checkpoints/{id}, POST …/checkpoints/{id}/restore (NDJSON; every
//     process is killed and the files are put back in place). Checkpoints
//     live in the Sprite and die with it. The quirk the reference met:
//     right after a restore the overlay is listable before reads work —
//     the first Options.ReadsFailAfterRestore fs/read calls answer 503.
//   - The Sprite's URL (url in its JSON) is http://127.0.0.1:PORT/_sprite/
//     <name>/, proxied to the Sprite's HTTP port (Options.HTTPPort) on
//     the host; with url_settings.auth "sprite" it needs the Bearer token.
//
// Error bodies are {"error": code, "message": text} as the SDK's
// parseAPIError reads them; 429 carries retry_after_seconds and
// Retry-After.
package spritesfake

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
)

// Options configure the fake beyond fakecloud's.
type Options struct {
	fakecloud.Options
	// HTTPPort is the port the Sprite's URL reaches on the host. Default
	// 8080.
	HTTPPort int
	// ReadsFailAfterRestore is how many fs/read calls fail with 503 after
	// a checkpoint restore. Default 2; negative is none.
	ReadsFailAfterRestore int
}

// Server is the fake.
type Server struct {
	*fakecloud.Server
	opts  Options
	token string

	mu      sync.Mutex
	sprites map[string]*sprite // by name
}

// sprite is one fake Sprite.
type sprite struct {
	sb       *fakecloud.Sandbox
	name     string
	auth     string
	labels   []string
	created  time.Time
	updated  time.Time
	cps      []checkpoint
	badReads int
	sessions map[int]*session
}

// New starts the fake. Its kill semantics are Sprites': the kill endpoint
// reaches the process group.
func New(opts Options) (*Server, error) {
	opts.Kill = fakecloud.GroupKill
	if opts.IDPrefix == "" {
		opts.IDPrefix = "sprite-"
	}
	if opts.HTTPPort == 0 {
		opts.HTTPPort = 8080
	}
	if opts.ReadsFailAfterRestore == 0 {
		opts.ReadsFailAfterRestore = 2
	}
	// The token is checked here, not by fakecloud: a Sprite's public URL
	// is the one route that needs none, and a 401 has Sprites' body.
	token := opts.Token
	opts.Token = ""
	fs, err := fakecloud.New(opts.Options)
	if err != nil {
		return nil, err
	}
	s := &Server{Server: fs, opts: opts, token: token, sprites: map[string]*sprite{}}
	s.routes()
	return s, nil
}

// APIURL is the base URL to give SPRITES_API_URL.
func (s *Server) APIURL() string { return s.URL() }

// Routes lists every route name the fake counts requests under.
var Routes = []string{"create", "list", "get", "update", "delete", "exec", "kill",
	"fsRead", "fsWrite", "fsList", "fsDelete", "fsRename", "checkpoint", "checkpoints", "checkpointGet", "restore"}

// Requests returns the sum of every route's count.
func (s *Server) Requests() int {
	n := 0
	for _, r := range Routes {
		n += s.Count(r)
	}
	return n
}

// handle registers h under route with the Bearer check.
func (s *Server) handle(route, pattern string, h http.HandlerFunc) {
	s.Handle(route, pattern, func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			apiError(w, http.StatusUnauthorized, "unauthorized", "missing or invalid Authorization: Bearer token")
			return
		}
		h(w, r)
	})
}

func (s *Server) authorized(r *http.Request) bool {
	return s.token == "" || r.Header.Get("Authorization") == "Bearer "+s.token
}

func (s *Server) routes() {
	s.handle("create", "POST /v1/sprites", s.create)
	s.handle("list", "GET /v1/sprites", s.list)
	s.handle("get", "GET /v1/sprites/{name}", s.get)
	s.handle("update", "PUT /v1/sprites/{name}", s.update)
	s.handle("delete", "DELETE /v1/sprites/{name}", s.delete)
	s.handle("exec", "GET /v1/sprites/{name}/exec", s.exec)
	s.handle("kill", "POST /v1/sprites/{name}/exec/{id}/kill", s.kill)
	s.handle("fsRead", "GET /v1/sprites/{name}/fs/read", s.fsRead)
	s.handle("fsWrite", "PUT /v1/sprites/{name}/fs/write", s.fsWrite)
	s.handle("fsList", "GET /v1/sprites/{name}/fs/list", s.fsList)
	s.handle("fsDelete", "DELETE /v1/sprites/{name}/fs/delete", s.fsDelete)
	s.handle("fsRename", "POST /v1/sprites/{name}/fs/rename", s.fsRename)
	s.handle("checkpoint", "POST /v1/sprites/{name}/checkpoint", s.checkpoint)
	s.handle("checkpoints", "GET /v1/sprites/{name}/checkpoints", s.checkpoints)
	s.handle("checkpointGet", "GET /v1/sprites/{name}/checkpoints/{id}", s.checkpointGet)
	s.handle("restore", "POST /v1/sprites/{name}/checkpoints/{id}/restore", s.restore)
	s.Handle("proxy", "/_sprite/{name}/", s.proxy)
}

// apiError writes the Sprites error body.
func apiError(w http.ResponseWriter, status int, code, format string, args ...any) {
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	body := map[string]any{"error": code, "message": fmt.Sprintf(format, args...)}
	if status == http.StatusTooManyRequests {
		body["retry_after_seconds"] = 1
	}
	fakecloud.WriteJSON(w, status, body)
}

// SpriteJSON is a Sprite as the API returns it.
type SpriteJSON struct {
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	Organization string            `json:"organization"`
	Status       string            `json:"status"`
	URL          string            `json:"url"`
	URLSettings  map[string]string `json:"url_settings"`
	Labels       []string          `json:"labels"`
	CreatedAt    string            `json:"created_at"`
	UpdatedAt    string            `json:"updated_at"`
}

func (s *Server) json(sp *sprite) SpriteJSON {
	return SpriteJSON{ID: sp.sb.ID, Name: sp.name, Organization: "corral-fake", Status: "running",
		URL: s.URL() + "/_sprite/" + url.PathEscape(sp.name) + "/", URLSettings: map[string]string{"auth": sp.auth},
		Labels: append([]string{}, sp.labels...), CreatedAt: sp.created.Format(time.RFC3339Nano), UpdatedAt: sp.updated.Format(time.RFC3339Nano)}
}

// lookup returns the Sprite named in the path, or answers 404.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) *sprite {
	s.mu.Lock()
	sp := s.sprites[r.PathValue("name")]
	s.mu.Unlock()
	if sp == nil {
		apiError(w, http.StatusNotFound, "not_found", "sprite %q not found", r.PathValue("name"))
	}
	return sp
}

// Sprite returns the fake Sandbox behind the Sprite named name.
func (s *Server) Sprite(name string) (*fakecloud.Sandbox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sp := s.sprites[name]
	if sp == nil {
		return nil, false
	}
	return sp.sb, true
}

func validName(n string) bool {
	if n == "" || len(n) > 63 {
		return false
	}
	for i, c := range n {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && i > 0) {
			return false
		}
	}
	return true
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name            string            `json:"name"`
		URLSettings     map[string]string `json:"url_settings"`
		Labels          []string          `json:"labels"`
		WaitForCapacity bool              `json:"wait_for_capacity"`
		Config          map[string]any    `json:"config"`
		Environment     map[string]string `json:"environment"`
		Runtime         string            `json:"runtime"`
	}
	if err := fakecloud.DecodeJSON(r, &req); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request", "%v", err)
		return
	}
	if !validName(req.Name) {
		apiError(w, http.StatusBadRequest, "invalid_name", "name %q: lowercase letters, digits and '-', at most 63", req.Name)
		return
	}
	auth := req.URLSettings["auth"]
	if auth == "" {
		auth = "sprite"
	}
	if auth != "sprite" && auth != "public" {
		apiError(w, http.StatusBadRequest, "invalid_request", "url_settings.auth must be sprite or public")
		return
	}
	sb, err := s.CreateSandbox(req.Name, nil)
	if errors.Is(err, fakecloud.ErrNameTaken) {
		apiError(w, http.StatusConflict, "sprite_exists", "a sprite named %q already exists", req.Name)
		return
	}
	if err != nil {
		apiError(w, http.StatusInternalServerError, "internal", "%v", err)
		return
	}
	now := time.Now().UTC()
	sp := &sprite{sb: sb, name: req.Name, auth: auth, labels: req.Labels, created: now, updated: now, sessions: map[int]*session{}}
	s.mu.Lock()
	s.sprites[req.Name] = sp
	s.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusCreated, s.json(sp))
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	prefix := q.Get("prefix")
	max, _ := strconv.Atoi(q.Get("max_results"))
	if max <= 0 || max > 100 {
		max = 50
	}
	start, _ := strconv.Atoi(q.Get("continuation_token"))
	s.mu.Lock()
	var all []*sprite
	for _, sp := range s.sprites {
		if strings.HasPrefix(sp.name, prefix) {
			all = append(all, sp)
		}
	}
	s.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })
	out := struct {
		Sprites   []SpriteJSON `json:"sprites"`
		HasMore   bool         `json:"has_more"`
		NextToken string       `json:"next_continuation_token,omitempty"`
	}{Sprites: []SpriteJSON{}}
	for i := start; i < len(all) && i < start+max; i++ {
		out.Sprites = append(out.Sprites, s.json(all[i]))
	}
	if start+max < len(all) {
		out.HasMore, out.NextToken = true, strconv.Itoa(start+max)
	}
	fakecloud.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	if sp := s.lookup(w, r); sp != nil {
		s.mu.Lock()
		j := s.json(sp)
		s.mu.Unlock()
		fakecloud.WriteJSON(w, http.StatusOK, j)
	}
}

func (s *Server) update(w http.ResponseWriter, r *http.Request) {
	sp := s.lookup(w, r)
	if sp == nil {
		return
	}
	var req struct {
		URLSettings map[string]string `json:"url_settings"`
		Labels      []string          `json:"labels"`
	}
	if err := fakecloud.DecodeJSON(r, &req); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request", "%v", err)
		return
	}
	s.mu.Lock()
	if a := req.URLSettings["auth"]; a == "sprite" || a == "public" {
		sp.auth = a
	}
	if req.Labels != nil {
		sp.labels = req.Labels
	}
	sp.updated = time.Now().UTC()
	j := s.json(sp)
	s.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, j)
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	sp := s.lookup(w, r)
	if sp == nil {
		return
	}
	s.mu.Lock()
	delete(s.sprites, sp.name)
	s.mu.Unlock()
	if _, err := s.DeleteSandbox(r.Context(), sp.sb.ID); err != nil {
		apiError(w, http.StatusInternalServerError, "internal", "%v", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// proxy forwards the Sprite's URL to its HTTP port on the host.
func (s *Server) proxy(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	sp := s.sprites[r.PathValue("name")]
	auth := ""
	if sp != nil {
		auth = sp.auth
	}
	s.mu.Unlock()
	if sp == nil {
		apiError(w, http.StatusNotFound, "not_found", "no such sprite")
		return
	}
	if auth == "sprite" && !s.authorized(r) {
		apiError(w, http.StatusUnauthorized, "unauthorized", "this sprite's URL needs Authorization: Bearer (url_settings.auth is sprite)")
		return
	}
	target, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(s.opts.HTTPPort))
	rp := httputil.NewSingleHostReverseProxy(target)
	prefix := "/_sprite/" + sp.name
	r2 := r.Clone(r.Context())
	r2.URL.Path = strings.TrimPrefix(r.URL.Path, prefix)
	r2.URL.RawPath = ""
	r2.Header.Del("Authorization")
	rp.ServeHTTP(w, r2)
}

func writeNDJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	_, _ = w.Write(append(b, '\n'))
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// HTTPPort is the host port the Sprites' URLs reach.
func (s *Server) HTTPPort() int { return s.opts.HTTPPort }
