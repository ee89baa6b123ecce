// Package blaxelfake is a loopback fake of Blaxel's sandboxes for tests:
// the control plane (api.blaxel.ai/v0: sandboxes and their previews) and
// each sandbox's own API (the sandbox-api at the sandbox's metadata.url:
// /process and /filesystem), with real host processes as sandboxes
// (internal/fakecloud).
//
// It speaks the wire format @blaxel/core 0.3.x and blaxel-ai/sandbox's
// sandbox-api use: the X-Blaxel-Authorization and X-Blaxel-Workspace
// headers, control-plane error bodies {code, error, message} (a taken name
// is 409 SANDBOX_ALREADY_EXISTS unless createIfNotExist), sandbox-api error
// bodies {error}, commands run as `sh -c <command>` in a process group of
// their own, the NDJSON stream of POST /process under Accept:
// text/event-stream ({type: stdout|stderr|result|keepalive, data}), and
// the group SIGKILL of DELETE /process/{id}/kill, which also writes
// "[Process is being forcefully killed]" into the process's stdout, as
// the real sandbox-api does.
//
// Faults are the kit's: Inject("create", fakecloud.Fault{Status: 504,
// Accept: true}) is a create the backend accepted and answered 504, as the
// edge in front of Blaxel's control plane does. SetStatus puts a sandbox
// in another state (TERMINATED, FAILED, DELETING, …).
package blaxelfake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
)

// Workspace is the workspace the fake serves.
const Workspace = "corral-test"

// Region is the region sandboxes report when the create names none.
const Region = "us-pdx-1"

// Server is the fake. It is safe for concurrent use.
type Server struct {
	*fakecloud.Server
	key string

	mu         sync.Mutex
	boxes      map[string]*box
	routesByID map[string]*route
}

// route is a preview's target: a port on the host (the fake's sandboxes
// are host processes) and the tokens a private preview takes.
type route struct {
	port   int
	public bool
	tokens map[string]bool
}

type box struct {
	sb         *fakecloud.Sandbox
	meta       map[string]any
	spec       map[string]any
	status     string
	created    time.Time
	previews   map[string]map[string]any
	previewIDs map[string]string

	pmu   sync.Mutex
	procs map[string]*proc // by pid and by name
}

// New starts the fake. opts.Token is the API key every request must carry
// in X-Blaxel-Authorization (Bearer); the kit's own bearer check is not
// used (Blaxel does not read Authorization).
func New(opts fakecloud.Options) (*Server, error) {
	key := opts.Token
	opts.Token = ""
	if opts.Kill == 0 {
		opts.Kill = fakecloud.GroupKill
	}
	fs, err := fakecloud.New(opts)
	if err != nil {
		return nil, err
	}
	s := &Server{Server: fs, key: key, boxes: map[string]*box{}, routesByID: map[string]*route{}}
	s.routes()
	return s, nil
}

// APIURL is the control plane's root (BL_API_URL for the SDK).
func (s *Server) APIURL() string { return s.URL() + "/v0" }

// RunURL is the root of the sandboxes' own APIs (BL_RUN_URL).
func (s *Server) RunURL() string { return s.URL() + "/run" }

// SetStatus sets a sandbox's status (DEPLOYED, TERMINATED, FAILED, …).
func (s *Server) SetStatus(name, status string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.boxes[name]
	if ok {
		b.status = status
	}
	return ok
}

// Names returns the names of the sandboxes the fake holds, sorted.
func (s *Server) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.boxes))
	for n := range s.boxes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Labels returns a sandbox's labels.
func (s *Server) Labels(name string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.boxes[name]
	if !ok {
		return nil
	}
	return b.sb.Labels
}

// handle registers a route behind Blaxel's auth headers.
func (s *Server) handle(route, pattern string, h http.HandlerFunc, sandboxAPI bool) {
	s.Handle(route, pattern, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Blaxel-Authorization") != "Bearer "+s.key {
			s.fail(w, sandboxAPI, http.StatusUnauthorized, "UNAUTHORIZED", "invalid or missing credentials")
			return
		}
		if ws := r.Header.Get("X-Blaxel-Workspace"); ws != Workspace {
			s.fail(w, sandboxAPI, http.StatusForbidden, "FORBIDDEN", "no access to workspace "+ws)
			return
		}
		h(w, r)
	})
}

// fail writes the control plane's {code, error, message} or the
// sandbox-api's {error}.
func (s *Server) fail(w http.ResponseWriter, sandboxAPI bool, status int, code, msg string) {
	if sandboxAPI {
		fakecloud.WriteJSON(w, status, map[string]string{"error": msg})
		return
	}
	fakecloud.WriteJSON(w, status, map[string]any{"code": status, "error": code, "message": msg})
}

func (s *Server) routes() {
	cp := func(route, pattern string, h http.HandlerFunc) { s.handle(route, pattern, h, false) }
	cp("create", "POST /v0/sandboxes", s.create)
	cp("list", "GET /v0/sandboxes", s.list)
	cp("get", "GET /v0/sandboxes/{name}", s.get)
	cp("delete", "DELETE /v0/sandboxes/{name}", s.del)
	cp("getPreview", "GET /v0/sandboxes/{name}/previews/{preview}", s.getPreview)
	cp("createPreview", "POST /v0/sandboxes/{name}/previews", s.createPreview)
	cp("createToken", "POST /v0/sandboxes/{name}/previews/{preview}/tokens", s.createToken)
	s.Handle("preview", "/preview/{id}/{rest...}", s.preview)
	sa := func(route, pattern string, h http.HandlerFunc) { s.handle(route, pattern, h, true) }
	sa("process", "POST /run/{name}/process", s.startProcess)
	sa("processGet", "GET /run/{name}/process/{id}", s.getProcess)
	sa("processLogs", "GET /run/{name}/process/{id}/logs", s.processLogs)
	sa("processStream", "GET /run/{name}/process/{id}/logs/stream", s.processStream)
	sa("processKill", "DELETE /run/{name}/process/{id}/kill", s.killProcess)
	sa("processStop", "DELETE /run/{name}/process/{id}", s.stopProcess)
	sa("fsGet", "GET /run/{name}/filesystem/{path...}", s.fsGet)
	sa("fsPut", "PUT /run/{name}/filesystem/{path...}", s.fsPut)
	sa("fsDelete", "DELETE /run/{name}/filesystem/{path...}", s.fsDelete)
}

// nameRE is Blaxel's rule for metadata.name.
var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// gone reports the states a name can be created again from.
func reusable(status string) bool { return status == "FAILED" || status == "TERMINATED" }

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Metadata map[string]any `json:"metadata"`
		Spec     map[string]any `json:"spec"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		s.fail(w, false, http.StatusBadRequest, "BAD_REQUEST", "bad JSON body: "+err.Error())
		return
	}
	if req.Metadata == nil {
		req.Metadata = map[string]any{}
	}
	name, _ := req.Metadata["name"].(string)
	if name == "" {
		name = "sandbox-" + randomHex(4)
	}
	if len(name) > 49 || !nameRE.MatchString(name) {
		s.fail(w, false, http.StatusBadRequest, "INVALID_NAME", "name must be lowercase alphanumeric with hyphens, max 49 characters: "+name)
		return
	}
	labels := map[string]string{}
	if l, ok := req.Metadata["labels"].(map[string]any); ok {
		for k, v := range l {
			if sv, ok := v.(string); ok {
				labels[k] = sv
			}
		}
	}
	s.mu.Lock()
	if old, ok := s.boxes[name]; ok {
		if !reusable(old.status) {
			if r.URL.Query().Get("createIfNotExist") == "true" {
				out := s.view(old)
				s.mu.Unlock()
				fakecloud.WriteJSON(w, http.StatusOK, out)
				return
			}
			s.mu.Unlock()
			s.fail(w, false, http.StatusConflict, "SANDBOX_ALREADY_EXISTS", "sandbox "+name+" already exists")
			return
		}
		delete(s.boxes, name)
		s.mu.Unlock()
		_, _ = s.DeleteSandbox(context.WithoutCancel(r.Context()), old.sb.ID)
		s.mu.Lock()
	}
	sb, err := s.CreateSandbox(name, labels)
	if err != nil {
		s.mu.Unlock()
		s.fail(w, false, http.StatusInternalServerError, "INTERNAL", err.Error())
		return
	}
	if req.Spec == nil {
		req.Spec = map[string]any{}
	}
	if req.Spec["region"] == nil {
		req.Spec["region"] = Region
	}
	req.Metadata["name"] = name
	b := &box{sb: sb, meta: req.Metadata, spec: req.Spec, status: "DEPLOYED", created: time.Now().UTC(),
		previews: map[string]map[string]any{}, previewIDs: map[string]string{}, procs: map[string]*proc{}}
	s.boxes[name] = b
	out := s.view(b)
	s.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, out)
}

// view is a sandbox's JSON; s.mu is held.
func (s *Server) view(b *box) map[string]any {
	meta := map[string]any{}
	for k, v := range b.meta {
		meta[k] = v
	}
	meta["url"] = s.RunURL() + "/" + b.sb.Name
	meta["workspace"] = Workspace
	meta["createdAt"] = b.created.Format(time.RFC3339)
	meta["updatedAt"] = b.created.Format(time.RFC3339)
	meta["labels"] = b.sb.Labels
	return map[string]any{"metadata": meta, "spec": b.spec, "status": b.status, "state": "RUNNING"}
}

func (s *Server) lookup(w http.ResponseWriter, r *http.Request, sandboxAPI bool) (*box, bool) {
	name := r.PathValue("name")
	s.mu.Lock()
	b, ok := s.boxes[name]
	s.mu.Unlock()
	if !ok {
		s.fail(w, sandboxAPI, http.StatusNotFound, "SANDBOX_NOT_FOUND", "sandbox "+name+" not found")
	}
	return b, ok
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	b, ok := s.lookup(w, r, false)
	if !ok {
		return
	}
	s.mu.Lock()
	out := s.view(b)
	s.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	var bs []*box
	for _, b := range s.boxes {
		bs = append(bs, b)
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].created.After(bs[j].created) })
	out := make([]map[string]any, 0, len(bs))
	for _, b := range bs {
		out = append(out, s.view(b))
	}
	s.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) del(w http.ResponseWriter, r *http.Request) {
	b, ok := s.lookup(w, r, false)
	if !ok {
		return
	}
	s.mu.Lock()
	b.status = "DELETING"
	out := s.view(b)
	delete(s.boxes, b.sb.Name)
	s.mu.Unlock()
	_, _ = s.DeleteSandbox(context.WithoutCancel(r.Context()), b.sb.ID)
	fakecloud.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) getPreview(w http.ResponseWriter, r *http.Request) {
	b, ok := s.lookup(w, r, false)
	if !ok {
		return
	}
	s.mu.Lock()
	p, ok := b.previews[r.PathValue("preview")]
	s.mu.Unlock()
	if !ok {
		s.fail(w, false, http.StatusNotFound, "PREVIEW_NOT_FOUND", "preview "+r.PathValue("preview")+" not found")
		return
	}
	fakecloud.WriteJSON(w, http.StatusOK, p)
}

func (s *Server) createPreview(w http.ResponseWriter, r *http.Request) {
	b, ok := s.lookup(w, r, false)
	if !ok {
		return
	}
	var req struct {
		Metadata map[string]any `json:"metadata"`
		Spec     map[string]any `json:"spec"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Metadata == nil || req.Spec == nil {
		s.fail(w, false, http.StatusBadRequest, "BAD_REQUEST", "a preview needs metadata and spec")
		return
	}
	name, _ := req.Metadata["name"].(string)
	port, _ := req.Spec["port"].(float64)
	if name == "" || port < 1 {
		s.fail(w, false, http.StatusBadRequest, "BAD_REQUEST", "a preview needs metadata.name and spec.port")
		return
	}
	req.Metadata["resourceName"], req.Metadata["resourceType"], req.Metadata["workspace"] = b.sb.Name, "sandbox", Workspace
	public, _ := req.Spec["public"].(bool)
	id := randomHex(8)
	req.Spec["url"] = s.URL() + "/preview/" + id
	p := map[string]any{"metadata": req.Metadata, "spec": req.Spec, "status": "DEPLOYED"}
	s.mu.Lock()
	if _, dup := b.previews[name]; dup && r.URL.Query().Get("force") != "true" {
		s.mu.Unlock()
		s.fail(w, false, http.StatusConflict, "PREVIEW_ALREADY_EXISTS", "preview "+name+" already exists")
		return
	}
	b.previews[name] = p
	s.routesByID[id] = &route{port: int(port), public: public, tokens: map[string]bool{}}
	b.previewIDs[name] = id
	s.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, p)
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	b, ok := s.lookup(w, r, false)
	if !ok {
		return
	}
	s.mu.Lock()
	_, ok = b.previews[r.PathValue("preview")]
	s.mu.Unlock()
	if !ok {
		s.fail(w, false, http.StatusNotFound, "PREVIEW_NOT_FOUND", "preview not found")
		return
	}
	var req struct {
		Metadata map[string]any `json:"metadata"`
		Spec     map[string]any `json:"spec"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Spec["expiresAt"] == nil {
		s.fail(w, false, http.StatusBadRequest, "BAD_REQUEST", "a token needs spec.expiresAt")
		return
	}
	tok := "bl_pt_" + randomHex(16)
	req.Spec["token"] = tok
	s.mu.Lock()
	if rt := s.routesByID[b.previewIDs[r.PathValue("preview")]]; rt != nil {
		rt.tokens[tok] = true
	}
	s.mu.Unlock()
	req.Spec["expired"] = false
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"metadata": req.Metadata, "spec": req.Spec})
}

// preview proxies a preview URL to its port on loopback; a private
// preview wants a token of its own in X-Blaxel-Preview-Token (or the
// bl_preview_token query parameter), else 401.
func (s *Server) preview(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	rt := s.routesByID[r.PathValue("id")]
	ok := rt != nil && (rt.public || rt.tokens[r.Header.Get("X-Blaxel-Preview-Token")] || rt.tokens[r.URL.Query().Get("bl_preview_token")])
	s.mu.Unlock()
	switch {
	case rt == nil:
		http.Error(w, "preview not found", http.StatusNotFound)
		return
	case !ok:
		http.Error(w, "missing or invalid preview token", http.StatusUnauthorized)
		return
	}
	target := &url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(rt.port)}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.URL.Path = "/" + r.PathValue("rest")
		pr.Out.URL.RawPath = ""
		pr.Out.Header.Del("X-Blaxel-Preview-Token")
	}}
	rp.ServeHTTP(w, r)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// cleanPath is a sandbox-api path: the wildcard with its leading slash.
func cleanPath(p string) string {
	return "/" + strings.TrimLeft(p, "/")
}
