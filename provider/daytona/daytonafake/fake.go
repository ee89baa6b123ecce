// Package daytonafake is a loopback fake of Daytona, built on
// internal/fakecloud, for the daytona provider's tests, cmd/corral's tests
// and the official SDK check. It speaks the part of Daytona's wire API that
// corral and @daytonaio/sdk use, with the paths, JSON field names and
// error bodies of the real services:
//
//   - the control plane under /api (Bearer auth): POST /api/sandbox,
//     GET /api/sandbox (labels as a JSON object, cursor pages),
//     GET|DELETE /api/sandbox/{idOrName}, POST …/start, …/stop,
//     …/snapshot, GET …/toolbox-proxy-url, …/ports/{port}/preview-url,
//     …/ports/{port}/signed-preview-url, GET /api/snapshots/{idOrName} and
//     DELETE /api/snapshots/{id} (by id only, as the API documents: a
//     name is resolved with the GET first, as the SDK does);
//   - the toolbox under /toolbox/{sandboxId} (the toolboxProxyUrl every
//     sandbox carries, as the real API returns it): process/execute,
//     process/session (create, get, delete, exec with runAsync, command
//     status, logs — plain or over a WebSocket with follow=true — and
//     input), work-dir, user-home-dir and files (list, folder, info,
//     delete, bulk-upload, bulk-download).
//
// Semantics kept from the real daemon: a session is one long-running
// shell that reads each command from its input and runs it in the
// foreground, one after the other (a command waits for the one before it
// in the same session); the command is sourced in that shell, so it is
// not the leader of a process group of its own (a kill of the group of
// its pid reaches nothing unless the command made its own session, e.g.
// with setsid); deleting a session SIGKILLs its shell only; a command's
// stdin is a FIFO the daemon keeps open, so it never sees EOF; logs are
// the command's streams with 3-byte markers (01 01 01 for stdout, 02 02 02
// for stderr) in front of each piece, and the WebSocket closes with a
// normal closure once the command's output is drained and its exit code
// written. process/execute returns one combined output string.
//
// One difference, on purpose: the real daemon labels output line by line
// through a shell read loop (a last line without a newline gains one, NUL
// bytes are lost); the fake labels each chunk as it arrives, byte-exact.
//
// Routes (for faults and counts) are named create, list, get, delete,
// start, stop, snapshot, getSnapshot, deleteSnapshot, proxyURL, preview, signedPreview,
// execute, sessionCreate, sessionGet, sessionDelete, sessionExec, command,
// logs, input, workDir, homeDir, filesList, filesInfo, filesDelete,
// folder, upload and download.
package daytonafake

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
)

// Server is a running fake.
type Server struct {
	*fakecloud.Server

	mu        sync.Mutex
	sandboxes map[string]*sandbox // by id
	snapshots map[string]*snapshot
	org       string
}

type sandbox struct {
	sb        *fakecloud.Sandbox
	state     string
	snapshot  string
	labels    map[string]string
	env       map[string]string
	autoStop  int
	autoDel   *int
	blockAll  bool
	network   Network
	public    bool
	user      string
	updatedAt time.Time

	mu       sync.Mutex
	sessions map[string]*session
}

type snapshot struct {
	id, name string
	dir      string // a copy of the workspace
	created  time.Time
}

// New starts the fake with the kit's options (Token is the API key the
// fake accepts). Close it with Close.
func New(opts fakecloud.Options) (*Server, error) {
	if opts.IDPrefix == "" {
		opts.IDPrefix = "dtn-"
	}
	fs, err := fakecloud.New(opts)
	if err != nil {
		return nil, err
	}
	s := &Server{Server: fs, sandboxes: map[string]*sandbox{}, snapshots: map[string]*snapshot{}, org: "org-fake-0001"}
	s.Handle("create", "POST /api/sandbox", s.create)
	s.Handle("list", "GET /api/sandbox", s.list)
	s.Handle("get", "GET /api/sandbox/{id}", s.get)
	s.Handle("delete", "DELETE /api/sandbox/{id}", s.delete)
	s.Handle("start", "POST /api/sandbox/{id}/start", s.start)
	s.Handle("stop", "POST /api/sandbox/{id}/stop", s.stop)
	s.Handle("snapshot", "POST /api/sandbox/{id}/snapshot", s.createSnapshot)
	s.Handle("getSnapshot", "GET /api/snapshots/{id}", s.getSnapshot)
	s.Handle("deleteSnapshot", "DELETE /api/snapshots/{id}", s.deleteSnapshot)
	s.Handle("proxyURL", "GET /api/sandbox/{id}/toolbox-proxy-url", s.proxyURL)
	s.Handle("preview", "GET /api/sandbox/{id}/ports/{port}/preview-url", s.preview)
	s.Handle("signedPreview", "GET /api/sandbox/{id}/ports/{port}/signed-preview-url", s.signedPreview)
	s.toolboxRoutes()
	return s, nil
}

// APIURL is the control plane's root, DAYTONA_API_URL for the SDK.
func (s *Server) APIURL() string { return s.URL() + "/api" }

// ToolboxURL is the toolboxProxyUrl every sandbox carries.
func (s *Server) ToolboxURL() string { return s.URL() + "/toolbox" }

// Close destroys every sandbox and snapshot and stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	var snaps []string
	for _, sn := range s.snapshots {
		snaps = append(snaps, sn.dir)
	}
	for _, d := range s.sandboxes {
		d.killSessions()
	}
	s.mu.Unlock()
	s.Server.Close()
	for _, d := range snaps {
		_ = os.RemoveAll(d)
	}
}

// SandboxEnv returns the env a create sent for the sandbox with id (what
// Daytona would persist in the sandbox's configuration).
func (s *Server) SandboxEnv(id string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.sandboxes[id]; ok {
		return maps.Clone(d.env)
	}
	return nil
}

// SandboxState returns the state of the sandbox with id ("" when gone).
func (s *Server) SandboxState(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.sandboxes[id]; ok {
		return d.state
	}
	return ""
}

// SetState forces the state of a sandbox (a test's "Daytona stopped or
// archived it"); stopping kills its sessions.
func (s *Server) SetState(id, state string) bool {
	s.mu.Lock()
	d, ok := s.sandboxes[id]
	if ok {
		d.state = state
	}
	s.mu.Unlock()
	if ok && state != "started" {
		d.killSessions()
	}
	return ok
}

// apiError writes the control plane's error body.
func apiError(w http.ResponseWriter, status int, format string, args ...any) {
	fakecloud.WriteJSON(w, status, map[string]any{
		"statusCode": status, "message": fmt.Sprintf(format, args...),
		"error": http.StatusText(status), "code": codeFor(status), "source": "DAYTONA_API",
		"timestamp": time.Now().UTC().Format(time.RFC3339Nano),
	})
}

func codeFor(status int) string {
	switch status {
	case 400:
		return "BAD_REQUEST"
	case 401:
		return "UNAUTHORIZED"
	case 403:
		return "FORBIDDEN"
	case 404:
		return "NOT_FOUND"
	case 409:
		return "CONFLICT"
	case 410:
		return "GONE"
	case 429:
		return "TOO_MANY_REQUESTS"
	}
	return "INTERNAL_SERVER_ERROR"
}

// createRequest is CreateSandbox (api-client models/create-sandbox).
type createRequest struct {
	Name                string              `json:"name"`
	Snapshot            string              `json:"snapshot"`
	User                string              `json:"user"`
	Env                 map[string]string   `json:"env"`
	Labels              map[string]string   `json:"labels"`
	Public              bool                `json:"public"`
	NetworkBlockAll     bool                `json:"networkBlockAll"`
	NetworkAllowList    string              `json:"networkAllowList"`
	DomainAllowList     string              `json:"domainAllowList"`
	OutboundProxyURL    string              `json:"outboundProxyUrl"`
	OtelEndpoint        string              `json:"otelEndpointOverride"`
	Target              string              `json:"target"`
	CPU                 *float64            `json:"cpu"`
	GPU                 *float64            `json:"gpu"`
	GPUType             []string            `json:"gpuType"`
	Spot                bool                `json:"spot"`
	Memory              *float64            `json:"memory"`
	Disk                *float64            `json:"disk"`
	AutoStopInterval    *int                `json:"autoStopInterval"`
	AutoPauseInterval   *int                `json:"autoPauseInterval"`
	AutoArchiveInterval *int                `json:"autoArchiveInterval"`
	AutoDeleteInterval  *int                `json:"autoDeleteInterval"`
	TTLMinutes          *int                `json:"ttlMinutes"`
	Volumes             []json.RawMessage   `json:"volumes"`
	BuildInfo           json.RawMessage     `json:"buildInfo"`
	LinkedSandbox       string              `json:"linkedSandbox"`
	Secrets             []map[string]string `json:"secrets"`
	KVM                 bool                `json:"kvm"`
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if err := fakecloud.DecodeJSON(r, &req); err != nil {
		apiError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if err := checkNetwork(req.NetworkAllowList, req.DomainAllowList); err != nil {
		apiError(w, http.StatusBadRequest, "%v", err)
		return
	}
	name := req.Name
	s.mu.Lock()
	for _, d := range s.sandboxes {
		if name != "" && d.sb.Name == name {
			s.mu.Unlock()
			apiError(w, http.StatusConflict, "Sandbox with name %s already exists", name)
			return
		}
	}
	var snap *snapshot
	if req.Snapshot != "" {
		for _, sn := range s.snapshots {
			if sn.name == req.Snapshot || sn.id == req.Snapshot {
				snap = sn
			}
		}
	}
	s.mu.Unlock()
	if req.Snapshot != "" && snap == nil && !baseSnapshots[req.Snapshot] {
		apiError(w, http.StatusNotFound, "Snapshot %s not found. Did you add it through the Daytona Dashboard?", req.Snapshot)
		return
	}
	sb, err := s.CreateSandbox(name, req.Labels)
	if err != nil {
		apiError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	if name == "" {
		sb.Name = sb.ID // Daytona names an unnamed sandbox by its id
	}
	if snap != nil {
		if err := copyTree(snap.dir, sb.Root); err != nil {
			apiError(w, http.StatusInternalServerError, "restoring snapshot: %v", err)
			return
		}
	}
	user := req.User
	if user == "" {
		user = "daytona"
	}
	d := &sandbox{sb: sb, state: "started", snapshot: req.Snapshot, labels: maps.Clone(sb.Labels), env: maps.Clone(req.Env),
		autoStop: 15, autoDel: req.AutoDeleteInterval, blockAll: req.NetworkBlockAll, public: req.Public,
		network: Network{BlockAll: req.NetworkBlockAll, NetworkAllowList: req.NetworkAllowList, DomainAllowList: req.DomainAllowList}, user: user,
		updatedAt: time.Now().UTC(), sessions: map[string]*session{}}
	if d.env == nil {
		d.env = map[string]string{}
	}
	if req.AutoStopInterval != nil {
		d.autoStop = *req.AutoStopInterval
	}
	if d.snapshot == "" {
		d.snapshot = "daytonaio/sandbox:0.5.0"
	}
	s.mu.Lock()
	s.sandboxes[sb.ID] = d
	s.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, s.dto(d, true))
}

// dto is the Sandbox (full) or SandboxListItem JSON.
func (s *Server) dto(d *sandbox, full bool) map[string]any {
	created := d.sb.Created.Format(time.RFC3339Nano)
	m := map[string]any{
		"id": d.sb.ID, "organizationId": s.org, "name": d.sb.Name, "snapshot": d.snapshot, "user": d.user,
		"labels": d.labels, "public": d.public, "networkBlockAll": d.blockAll, "target": "us",
		"cpu": 1, "gpu": 0, "memory": 1, "disk": 3, "state": d.state, "desiredState": desired(d.state),
		"autoStopInterval": d.autoStop, "autoArchiveInterval": 10080, "createdAt": created,
		"updatedAt": d.updatedAt.Format(time.RFC3339Nano), "lastActivityAt": d.updatedAt.Format(time.RFC3339Nano),
		"sandboxClass": "container", "backupState": "None",
	}
	if d.network.NetworkAllowList != "" {
		m["networkAllowList"] = d.network.NetworkAllowList
	}
	if d.network.DomainAllowList != "" {
		m["domainAllowList"] = d.network.DomainAllowList
	}
	if d.autoDel != nil {
		m["autoDeleteInterval"] = *d.autoDel
	} else {
		m["autoDeleteInterval"] = -1
	}
	if full {
		m["env"] = d.env
		m["toolboxProxyUrl"] = s.ToolboxURL()
		m["volumes"] = []any{}
		m["daemonVersion"] = "v0.218.0"
	}
	return m
}

func desired(state string) string {
	switch state {
	case "stopped", "archived":
		return state
	}
	return "started"
}

// lookup finds a sandbox by id or name.
func (s *Server) lookup(idOrName string) (*sandbox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.sandboxes[idOrName]; ok {
		return d, true
	}
	for _, d := range s.sandboxes {
		if d.sb.Name == idOrName {
			return d, true
		}
	}
	return nil, false
}

func (s *Server) find(w http.ResponseWriter, r *http.Request) (*sandbox, bool) {
	d, ok := s.lookup(r.PathValue("id"))
	if !ok {
		apiError(w, http.StatusNotFound, "Sandbox with ID or name %s not found", r.PathValue("id"))
	}
	return d, ok
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	if d, ok := s.find(w, r); ok {
		s.mu.Lock()
		m := s.dto(d, true)
		s.mu.Unlock()
		fakecloud.WriteJSON(w, http.StatusOK, m)
	}
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	labels := map[string]string{}
	if l := q.Get("labels"); l != "" {
		if err := json.Unmarshal([]byte(l), &labels); err != nil {
			apiError(w, http.StatusBadRequest, "labels must be a JSON object")
			return
		}
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= 200 {
			limit = n
		}
	}
	offset := 0
	if c := q.Get("cursor"); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil {
			apiError(w, http.StatusBadRequest, "bad cursor")
			return
		}
		offset = n
	}
	s.mu.Lock()
	var all []*sandbox
	for _, d := range s.sandboxes {
		if n := q.Get("name"); n != "" && d.sb.Name != n {
			continue
		}
		if id := q.Get("id"); id != "" && d.sb.ID != id {
			continue
		}
		match := true
		for k, v := range labels {
			if d.labels[k] != v {
				match = false
			}
		}
		if match {
			all = append(all, d)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].sb.Created.After(all[j].sb.Created) })
	items := []map[string]any{}
	for i := offset; i < len(all) && i < offset+limit; i++ {
		items = append(items, s.dto(all[i], false))
	}
	var next any
	if offset+limit < len(all) {
		next = strconv.Itoa(offset + limit)
	}
	s.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"items": items, "nextCursor": next})
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	d, ok := s.find(w, r)
	if !ok {
		return
	}
	d.killSessions()
	s.mu.Lock()
	delete(s.sandboxes, d.sb.ID)
	d.state = "destroyed"
	m := s.dto(d, true)
	s.mu.Unlock()
	if _, err := s.DeleteSandbox(r.Context(), d.sb.ID); err != nil {
		apiError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	fakecloud.WriteJSON(w, http.StatusOK, m)
}

func (s *Server) start(w http.ResponseWriter, r *http.Request) {
	d, ok := s.find(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	if d.state == "started" || d.state == "stopped" || d.state == "archived" {
		d.state, d.updatedAt = "started", time.Now().UTC()
	}
	m := s.dto(d, true)
	s.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, m)
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	d, ok := s.find(w, r)
	if !ok {
		return
	}
	d.killSessions()
	s.mu.Lock()
	d.state, d.updatedAt = "stopped", time.Now().UTC()
	m := s.dto(d, true)
	s.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, m)
}

func (s *Server) proxyURL(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.find(w, r); ok {
		fakecloud.WriteJSON(w, http.StatusOK, map[string]string{"url": s.ToolboxURL()})
	}
}

func port(w http.ResponseWriter, r *http.Request) (int, bool) {
	p, err := strconv.Atoi(r.PathValue("port"))
	if err != nil || p < 1 || p > 65535 {
		apiError(w, http.StatusBadRequest, "Invalid port")
		return 0, false
	}
	return p, true
}

// preview answers PortPreviewUrl: the loopback URL of the port (the fake's
// sandboxes are host processes, so the port is on 127.0.0.1) and a token.
func (s *Server) preview(w http.ResponseWriter, r *http.Request) {
	d, ok := s.find(w, r)
	if !ok {
		return
	}
	if p, ok := port(w, r); ok {
		fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"sandboxId": d.sb.ID,
			"url": fmt.Sprintf("http://127.0.0.1:%d", p), "token": "preview-" + d.sb.ID})
	}
}

func (s *Server) signedPreview(w http.ResponseWriter, r *http.Request) {
	d, ok := s.find(w, r)
	if !ok {
		return
	}
	if p, ok := port(w, r); ok {
		fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"sandboxId": d.sb.ID, "port": p,
			"token": "signed-" + d.sb.ID, "url": fmt.Sprintf("http://127.0.0.1:%d", p)})
	}
}

// copyTree copies the regular files, directories and links under src
// into dst (created).
func copyTree(src, dst string) error {
	return filepath.Walk(src, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		to := filepath.Join(dst, rel)
		switch {
		case fi.IsDir():
			return os.MkdirAll(to, fi.Mode().Perm())
		case fi.Mode()&os.ModeSymlink != 0:
			l, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(l, to)
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(to, b, fi.Mode().Perm())
		}
		return nil
	})
}

// baseSnapshots are the snapshots every organization can create from.
var baseSnapshots = map[string]bool{"daytonaio/sandbox:0.5.0": true, "daytona-small": true, "daytona-medium": true, "daytona-large": true}

var errGone = errors.New("sandbox is not running")

// running returns the sandbox the toolbox request is for, when started.
func (s *Server) running(w http.ResponseWriter, r *http.Request) (*sandbox, bool) {
	d, ok := s.lookup(r.PathValue("sid"))
	if !ok {
		daemonError(w, http.StatusNotFound, "NOT_FOUND", "sandbox not found")
		return nil, false
	}
	s.mu.Lock()
	st := d.state
	s.mu.Unlock()
	if st != "started" {
		// The proxy cannot reach a sandbox that is not running.
		daemonError(w, http.StatusBadGateway, "SANDBOX_NOT_STARTED", "%v (state %s)", errGone, st)
		return nil, false
	}
	return d, true
}
