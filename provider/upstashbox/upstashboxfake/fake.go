// Package upstashboxfake is a loopback fake of Upstash Box for tests: the
// REST API of @upstash/box 0.5.5 (/v2/box…, X-Box-Api-Key, {"error"}
// bodies) and the exec session WebSocket, with real host processes as
// boxes (internal/fakecloud).
//
// Semantics imitated:
//   - create answers "creating"; the box is "idle" from the next GET on
//     (the SDK polls); a name is unique while its box lives; get takes an
//     id or a name; a deleted box is 404 {"error":"box not found"}.
//   - pause and resume: a paused box refuses exec, sessions and files
//     with 409 until resumed (its processes keep running: host processes
//     cannot be frozen).
//   - HTTP exec runs {"command": argv, "folder"} and answers {output,
//     error, exit_code} once the command and its output ended; it has no
//     cwd (folder only) and no environment. What the command left running
//     in another session outlives it.
//   - exec-stream: the output as raw text, then "event: exit\ndata:
//     {\"exit_code\":N}".
//   - the session WebSocket (upstashbox.SessionPath): JSON frames with
//     base64 data; signal frames reach the command's process group;
//     terminate sends TERM, then KILL after graceMs; each stream is capped
//     at 8 MiB (then TERM); dropping the socket kills the command's group
//     (fakecloud.KillOnDisconnect) and nothing re-attaches to it.
//   - paths: /workspace/home (the SDK's workspace) is the box's
//     workspace directory on the host; other absolute paths are taken as
//     they are, relative ones under the workspace.
//   - snapshots copy the workspace; a box made from one gets the copy;
//     snapshots outlive their box.
//   - previews: https://{id}-{port}.preview.box.upstash.com with a bearer
//     token or basic-auth credentials when asked.
package upstashboxfake

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/provider/upstashbox"
)

// Workspace is the SDK's workspace path, mapped to each box's directory.
const Workspace = "/workspace/home"

// Options configure the fake.
type Options struct {
	// BaseDir holds the box directories and snapshots. Default: a fresh
	// temporary directory.
	BaseDir string
	// APIKey is the key every request must carry in X-Box-Api-Key.
	// Required.
	APIKey string
}

// Fake is a running fake of Upstash Box.
type Fake struct {
	*fakecloud.Server
	opts    Options
	snapDir string

	mu    sync.Mutex
	boxes map[string]*box
	snaps map[string]*snapshot
}

type box struct {
	fc       *fakecloud.Sandbox
	data     upstashbox.Box
	previews map[int]upstashbox.Preview
}

type snapshot struct {
	data upstashbox.Snapshot
	dir  string
}

// Routes are the names of the routes the fake serves (for Count).
var Routes = []string{"create", "list", "get", "delete", "status", "pause", "resume", "exec", "exec-stream",
	"session", "files.read", "files.write", "files.list", "snapshot", "snapshots", "deleteSnapshot",
	"fromSnapshot", "preview", "previews", "deletePreview"}

// Total returns how many requests the fake has served.
func (f *Fake) Total() int {
	n := 0
	for _, r := range Routes {
		n += f.Count(r)
	}
	return n
}

// New starts the fake.
func New(opts Options) (*Fake, error) {
	if opts.APIKey == "" {
		return nil, fmt.Errorf("upstashboxfake: an API key is required")
	}
	if opts.BaseDir == "" {
		d, err := os.MkdirTemp("", "corral-upstashfake-")
		if err != nil {
			return nil, err
		}
		opts.BaseDir = d
	}
	snapDir := filepath.Join(opts.BaseDir, "snapshots")
	if err := os.MkdirAll(snapDir, 0o755); err != nil {
		return nil, err
	}
	s, err := fakecloud.New(fakecloud.Options{BaseDir: filepath.Join(opts.BaseDir, "boxes"), Kill: fakecloud.KillOnDisconnect, IDPrefix: "box_"})
	if err != nil {
		return nil, err
	}
	f := &Fake{Server: s, opts: opts, snapDir: snapDir, boxes: map[string]*box{}, snaps: map[string]*snapshot{}}
	api := func(route, pattern string, h func(http.ResponseWriter, *http.Request)) {
		s.Handle(route, pattern, f.auth(h))
	}
	api("create", "POST /v2/box", f.create)
	api("list", "GET /v2/box", f.list)
	api("get", "GET /v2/box/{id}", f.get)
	api("delete", "DELETE /v2/box/{id}", f.delete)
	api("status", "GET /v2/box/{id}/status", f.status)
	api("pause", "POST /v2/box/{id}/pause", f.pause)
	api("resume", "POST /v2/box/{id}/resume", f.resume)
	api("exec", "POST /v2/box/{id}/exec", f.exec)
	api("exec-stream", "POST /v2/box/{id}/exec-stream", f.execStream)
	api("session", "GET /v2/box/{id}"+upstashbox.SessionPath, f.session)
	api("files.read", "GET /v2/box/{id}/files/read", f.readFile)
	api("files.write", "POST /v2/box/{id}/files/write", f.writeFile)
	api("files.list", "GET /v2/box/{id}/files/list", f.listFiles)
	api("snapshot", "POST /v2/box/{id}/snapshots", f.snapshot)
	api("snapshots", "GET /v2/box/{id}/snapshots", f.listSnapshots)
	api("deleteSnapshot", "DELETE /v2/box/{id}/snapshots/{sid}", f.deleteSnapshot)
	api("fromSnapshot", "POST /v2/box/from-snapshot", f.fromSnapshot)
	api("preview", "POST /v2/box/{id}/preview", f.preview)
	api("previews", "GET /v2/box/{id}/preview", f.listPreviews)
	api("deletePreview", "DELETE /v2/box/{id}/preview/{port}", f.deletePreview)
	s.Handle("port", "/_port/{id}/{port}/{rest...}", f.proxyPort)
	return f, nil
}

// PortURL is where the fake serves a box's port (the real
// https://{id}-{port}.preview.box.upstash.com cannot resolve on
// loopback): a proxy to the port on the host that checks the preview's
// bearer token or basic-auth credentials.
func (f *Fake) PortURL(id string, port int) string {
	return f.URL() + "/_port/" + id + "/" + strconv.Itoa(port)
}

func (f *Fake) proxyPort(w http.ResponseWriter, r *http.Request) {
	port, err := strconv.Atoi(r.PathValue("port"))
	f.mu.Lock()
	b, ok := f.boxes[r.PathValue("id")]
	var pv upstashbox.Preview
	var has bool
	if ok {
		pv, has = b.previews[port]
	}
	f.mu.Unlock()
	if !ok || err != nil || !has {
		writeError(w, http.StatusNotFound, "preview not found")
		return
	}
	if pv.Token != "" && r.Header.Get("Authorization") != "Bearer "+pv.Token {
		writeError(w, http.StatusUnauthorized, "invalid bearer token")
		return
	}
	if pv.Username != "" {
		if u, pw, ok := r.BasicAuth(); !ok || u != pv.Username || pw != pv.Password {
			writeError(w, http.StatusUnauthorized, "invalid credentials")
			return
		}
	}
	target := &url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(port)}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.URL.Path = "/" + r.PathValue("rest")
		pr.Out.URL.RawPath = ""
		pr.Out.Header.Del("Authorization")
	}}
	rp.ServeHTTP(w, r)
}

// Close destroys every box and stops the server.
func (f *Fake) Close() { f.Server.Close() }

// Box returns the fake's record of a box by id (nil when gone).
func (f *Fake) Box(id string) *upstashbox.Box {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.boxes[id]; ok {
		d := b.data
		return &d
	}
	return nil
}

// Boxes returns how many boxes live.
func (f *Fake) Boxes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.boxes)
}

// Snapshots returns how many snapshots exist.
func (f *Fake) Snapshots() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.snaps)
}

// writeError answers status with Box's {"error": message}.
func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	fakecloud.WriteJSON(w, status, upstashbox.ErrorBody{Error: fmt.Sprintf(format, args...)})
}

func (f *Fake) auth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(upstashbox.HeaderAPIKey) != f.opts.APIKey {
			writeError(w, http.StatusUnauthorized, "Unauthorized: invalid or missing API key")
			return
		}
		h(w, r)
	}
}

func newID(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid request body: %v", err)
		return false
	}
	return true
}

var sizes = []string{"small", "medium", "large"}
var runtimes = []string{"node", "python", "golang", "ruby", "rust"}

// newBox makes a box for req (and copies dir into its workspace).
func (f *Fake) newBox(w http.ResponseWriter, req upstashbox.CreateBox, from string) {
	if req.Size == "" {
		req.Size = "small"
	}
	if req.Runtime == "" {
		req.Runtime = "node"
	}
	if !slices.Contains(sizes, req.Size) {
		writeError(w, http.StatusBadRequest, "invalid size %q", req.Size)
		return
	}
	if !slices.Contains(runtimes, req.Runtime) {
		writeError(w, http.StatusBadRequest, "invalid runtime %q", req.Runtime)
		return
	}
	for k := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			writeError(w, http.StatusBadRequest, "invalid env var name")
			return
		}
	}
	labels := map[string]string{}
	for _, l := range req.Labels {
		labels[l] = "1"
	}
	fc, err := f.CreateSandbox(req.Name, labels)
	if err != nil {
		writeError(w, http.StatusConflict, "a box named %q already exists", req.Name)
		return
	}
	if from != "" {
		if err := copyTree(from, fc.Root); err != nil {
			writeError(w, http.StatusInternalServerError, "restoring the snapshot: %v", err)
			return
		}
	}
	now := time.Now().Unix()
	b := &box{fc: fc, previews: map[int]upstashbox.Preview{}, data: upstashbox.Box{ID: fc.ID, Name: req.Name, Labels: req.Labels,
		Size: req.Size, KeepAlive: req.KeepAlive, Runtime: req.Runtime, Status: upstashbox.StatusCreating,
		NetworkPolicy: req.NetworkPolicy, CreatedAt: now, UpdatedAt: now}}
	if b.data.NetworkPolicy == nil {
		b.data.NetworkPolicy = &upstashbox.NetworkPolicy{Mode: "allow-all"}
	}
	f.mu.Lock()
	f.boxes[fc.ID] = b
	out := b.data
	f.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, out)
}

func (f *Fake) create(w http.ResponseWriter, r *http.Request) {
	var req upstashbox.CreateBox
	if !decode(w, r, &req) {
		return
	}
	if req.SnapshotID != "" {
		writeError(w, http.StatusBadRequest, "snapshot_id belongs to /v2/box/from-snapshot")
		return
	}
	f.newBox(w, req, "")
}

func (f *Fake) fromSnapshot(w http.ResponseWriter, r *http.Request) {
	var req upstashbox.CreateBox
	if !decode(w, r, &req) {
		return
	}
	f.mu.Lock()
	sn, ok := f.snaps[req.SnapshotID]
	f.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "snapshot not found")
		return
	}
	f.newBox(w, req, sn.dir)
}

// lookup finds a box by id or name; it answers 404 itself.
func (f *Fake) lookup(w http.ResponseWriter, r *http.Request) (*box, bool) {
	id := r.PathValue("id")
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.boxes[id]; ok {
		return b, true
	}
	for _, b := range f.boxes {
		if b.data.Name != "" && b.data.Name == id {
			return b, true
		}
	}
	writeError(w, http.StatusNotFound, "box not found")
	return nil, false
}

// ready finds a running box: a paused one is 409.
func (f *Fake) ready(w http.ResponseWriter, r *http.Request) (*box, bool) {
	b, ok := f.lookup(w, r)
	if !ok {
		return nil, false
	}
	f.mu.Lock()
	st := b.data.Status
	f.mu.Unlock()
	if st == upstashbox.StatusPaused {
		writeError(w, http.StatusConflict, "box is paused")
		return nil, false
	}
	return b, true
}

func (f *Fake) get(w http.ResponseWriter, r *http.Request) {
	b, ok := f.lookup(w, r)
	if !ok {
		return
	}
	f.mu.Lock()
	if b.data.Status == upstashbox.StatusCreating { // ready by the first poll
		b.data.Status = upstashbox.StatusIdle
	}
	out := b.data
	f.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, out)
}

// list answers every box, or those with ?label=.
func (f *Fake) list(w http.ResponseWriter, r *http.Request) {
	label := r.URL.Query().Get("label")
	f.mu.Lock()
	out := []upstashbox.Box{}
	for _, b := range f.boxes {
		if label == "" || slices.Contains(b.data.Labels, label) {
			out = append(out, b.data)
		}
	}
	f.mu.Unlock()
	slices.SortFunc(out, func(a, b upstashbox.Box) int { return int(b.CreatedAt - a.CreatedAt) })
	fakecloud.WriteJSON(w, http.StatusOK, out)
}

func (f *Fake) delete(w http.ResponseWriter, r *http.Request) {
	b, ok := f.lookup(w, r)
	if !ok {
		return
	}
	f.mu.Lock()
	delete(f.boxes, b.fc.ID)
	f.mu.Unlock()
	if _, err := f.DeleteSandbox(r.Context(), b.fc.ID); err != nil {
		writeError(w, http.StatusInternalServerError, "deleting the box: %v", err)
		return
	}
	fakecloud.WriteJSON(w, http.StatusOK, map[string]string{"message": "box deleted"})
}

func (f *Fake) status(w http.ResponseWriter, r *http.Request) {
	b, ok := f.lookup(w, r)
	if !ok {
		return
	}
	f.mu.Lock()
	st := b.data.Status
	if st == upstashbox.StatusCreating {
		st = upstashbox.StatusIdle
	}
	f.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, upstashbox.StatusAnswer{Status: st})
}

func (f *Fake) setStatus(w http.ResponseWriter, r *http.Request, from, to string) {
	b, ok := f.lookup(w, r)
	if !ok {
		return
	}
	f.mu.Lock()
	cur := b.data.Status
	if cur == upstashbox.StatusCreating {
		cur = upstashbox.StatusIdle
	}
	if from == upstashbox.StatusPaused && cur != upstashbox.StatusPaused {
		f.mu.Unlock()
		writeError(w, http.StatusConflict, "box is not paused")
		return
	}
	if to == upstashbox.StatusPaused && b.data.KeepAlive {
		f.mu.Unlock()
		writeError(w, http.StatusBadRequest, "keep-alive boxes cannot be paused")
		return
	}
	b.data.Status, b.data.UpdatedAt = to, time.Now().Unix()
	f.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, map[string]string{"status": to})
}

func (f *Fake) pause(w http.ResponseWriter, r *http.Request) {
	f.setStatus(w, r, "", upstashbox.StatusPaused)
}

func (f *Fake) resume(w http.ResponseWriter, r *http.Request) {
	f.setStatus(w, r, upstashbox.StatusPaused, upstashbox.StatusIdle)
}

func (f *Fake) preview(w http.ResponseWriter, r *http.Request) {
	b, ok := f.ready(w, r)
	if !ok {
		return
	}
	var req upstashbox.PreviewRequest
	if !decode(w, r, &req) {
		return
	}
	if req.Port < 1 || req.Port > 65535 {
		writeError(w, http.StatusBadRequest, "invalid port")
		return
	}
	if req.BearerToken && req.BasicAuth {
		writeError(w, http.StatusBadRequest, "bearer_token and basic_auth are exclusive")
		return
	}
	pv := upstashbox.Preview{URL: fmt.Sprintf("https://%s-%d.preview.box.upstash.com", b.fc.ID, req.Port), Port: req.Port}
	switch {
	case req.BearerToken:
		pv.Token = newID("tok_")
	case req.BasicAuth:
		pv.Username, pv.Password = "box", newID("pw_")
	}
	f.mu.Lock()
	b.previews[req.Port] = pv
	f.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, pv)
}

func (f *Fake) listPreviews(w http.ResponseWriter, r *http.Request) {
	b, ok := f.lookup(w, r)
	if !ok {
		return
	}
	f.mu.Lock()
	out := []upstashbox.Preview{}
	for _, p := range b.previews {
		out = append(out, p)
	}
	f.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"previews": out})
}

func (f *Fake) deletePreview(w http.ResponseWriter, r *http.Request) {
	b, ok := f.lookup(w, r)
	if !ok {
		return
	}
	port, _ := strconv.Atoi(r.PathValue("port"))
	f.mu.Lock()
	_, had := b.previews[port]
	delete(b.previews, port)
	f.mu.Unlock()
	if !had {
		writeError(w, http.StatusNotFound, "preview not found")
		return
	}
	fakecloud.WriteJSON(w, http.StatusOK, map[string]string{"message": "preview deleted"})
}
