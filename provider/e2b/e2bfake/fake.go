// Package e2bfake is a loopback fake of E2B, built from
// internal/fakecloud, for the e2b provider's tests, cmd/corral's tests and
// the official SDK check: the control plane (REST with X-API-KEY) and
// envd (Connect-RPC process and filesystem services from the official
// protos, and the /files endpoints, with X-Access-Token) on one server,
// with E2B's paths, JSON field names, error bodies ({"code","message"})
// and status codes. Sandboxes are real host processes.
//
// envd is reached the way the SDK's sandboxUrl (E2B_SANDBOX_URL) reaches
// it: one base URL, the sandbox named by the E2b-Sandbox-Id header (or by
// a Host of 49983-<id>.<domain>). Point the SDK at it with
// apiUrl = sandboxUrl = URL().
//
// Semantics kept from E2B:
//   - ids are minted by the backend; the caller's key rides in metadata;
//   - envd's SendSignal reaches one pid (fakecloud.PIDOnly): a
//     backgrounded grandchild survives it;
//   - a process's output is multiplexed to every stream attached to it
//     (Start, then any Connect by pid), and a dead stream never stalls the
//     others (the fault of E2B issue 1587);
//   - a dropped Start stream leaves the process running (no kill on
//     disconnect); Connect to a process that ended within the last 30 s
//     streams its start and end (envd's retention), later it is NotFound;
//   - SendSignal SIGKILL/SIGTERM stops the output forwarding, so the end
//     event follows the process's exit even when a grandchild holds the
//     output open (envd's outCancel); without a signal the end waits for
//     the output to close, as envd's does;
//   - pause makes envd answer 502 until connect resumes the sandbox;
//     connect answers 200 for a running sandbox and 201 for a resumed one;
//   - a snapshot is a template (a copy of the sandbox's files) that
//     outlives its sandbox, deleted with DELETE /templates/{id}; fork is a
//     snapshot and a new sandbox from it (files only: the fake cannot keep
//     memory, so running processes do not carry over);
//   - a process ended by a signal reports "exit status 128+N" (the kit
//     cannot tell it from an exit with that code; real envd says
//     "signal: killed" with exit code -1);
//   - the sandbox timeout is recorded (endAt), not enforced.
//
// Routes (for faults and counts): create, list, get, delete, timeout,
// pause, connect, snapshot, snapshots, deleteTemplate, fork, network, and
// envd's health, files.read, files.write, and the RPC methods by name
// (start, procConnect, list.processes, sendInput, closeStdin, sendSignal,
// stat, makeDir, move, listDir, remove).
package e2bfake

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"crypto/rand"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/provider/e2b"
)

// Options configure the fake.
type Options struct {
	// BaseDir holds the sandbox directories (fakecloud's).
	BaseDir string
	// APIKey is the key every control-plane request must carry in
	// X-API-KEY. Required.
	APIKey string
	// Domain is the sandbox domain the answers report. Default
	// "e2b.local".
	Domain string
	// Kill is the kill semantics; default fakecloud.PIDOnly (envd's).
	// Set only to show what another semantics would do.
	Kill fakecloud.KillMode
	// Templates are the template ids or aliases create accepts besides
	// snapshots. Default {"base"}.
	Templates []string
}

// Fake is a running fake of E2B.
type Fake struct {
	*fakecloud.Server
	opts Options

	mu    sync.Mutex
	sbs   map[string]*sandbox  // by E2B id
	snaps map[string]*snapshot // by snapshot id (with its tag)
	marks []Mark
	bytes byteCount
}

// Mark is a point a client marked with GET /_mark/{name}: the requests
// the fake had served before it (marks and port traffic not counted).
type Mark struct {
	Name     string
	Requests int
	// BytesIn and BytesOut are the body bytes received and sent before it.
	BytesIn, BytesOut int64
}

// Marks returns the marks so far.
func (f *Fake) Marks() []Mark {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.marks)
}

// Routes are the names of the routes the fake serves (for Count).
var Routes = []string{"create", "list", "get", "delete", "timeout", "pause", "connect", "snapshot", "snapshots",
	"deleteTemplate", "fork", "network", "health", "files.read", "files.write", "start", "procConnect",
	"list.processes", "sendInput", "streamInput", "closeStdin", "sendSignal", "update", "stat", "makeDir",
	"move", "listDir", "remove"}

// Total returns how many API and envd requests the fake has served.
func (f *Fake) Total() int { return f.total() }

func (f *Fake) total() int {
	n := 0
	for _, r := range Routes {
		n += f.Count(r)
	}
	return n
}

type sandbox struct {
	fc          *fakecloud.Sandbox
	template    string
	alias       string
	metadata    map[string]string
	envVars     map[string]string
	started     time.Time
	endAt       time.Time
	paused      bool
	token       string // envdAccessToken
	traffic     string // trafficAccessToken ("" with public traffic)
	internet    *bool
	procs       map[int]*fproc
	procsMu     sync.Mutex
	publicTraff bool
}

type snapshot struct {
	id      string
	names   []string
	from    string // sandbox id
	dir     string // the copied files: home/ and workspace/
	created time.Time
}

// New starts the fake.
func New(opts Options) (*Fake, error) {
	if opts.APIKey == "" {
		return nil, fmt.Errorf("e2bfake: an API key is required")
	}
	if opts.Domain == "" {
		opts.Domain = "e2b.local"
	}
	if len(opts.Templates) == 0 {
		opts.Templates = []string{"base"}
	}
	kill := opts.Kill
	if kill == fakecloud.GroupKill {
		kill = fakecloud.PIDOnly
	}
	s, err := fakecloud.New(fakecloud.Options{BaseDir: opts.BaseDir, Kill: kill, IDPrefix: "i"})
	if err != nil {
		return nil, err
	}
	f := &Fake{Server: s, opts: opts, sbs: map[string]*sandbox{}, snaps: map[string]*snapshot{}}
	api := func(route, pattern string, h func(http.ResponseWriter, *http.Request)) {
		s.Handle(route, pattern, f.counted(f.apiAuth(h)))
	}
	api("create", "POST /v2/sandboxes", f.create)
	api("create", "POST /sandboxes", f.create)
	api("list", "GET /v2/sandboxes", f.list)
	api("get", "GET /sandboxes/{id}", f.get)
	api("delete", "DELETE /sandboxes/{id}", f.delete)
	api("timeout", "POST /sandboxes/{id}/timeout", f.timeout)
	api("pause", "POST /sandboxes/{id}/pause", f.pause)
	api("connect", "POST /v2/sandboxes/{id}/connect", f.connect)
	api("connect", "POST /sandboxes/{id}/connect", f.connect)
	api("snapshot", "POST /sandboxes/{id}/snapshots", f.snapshot)
	api("snapshots", "GET /snapshots", f.listSnapshots)
	api("deleteTemplate", "DELETE /templates/{id...}", f.deleteTemplate)
	api("fork", "POST /sandboxes/{id}/fork", f.fork)
	api("network", "PUT /sandboxes/{id}/network", f.network)
	f.envdRoutes()
	s.Handle("port", "/_port/{id}/{port}/{rest...}", f.proxyPort)
	s.Handle("mark", "GET /_mark/{name}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		in, out := f.Bytes()
		f.marks = append(f.marks, Mark{Name: r.PathValue("name"), Requests: f.total(), BytesIn: in, BytesOut: out})
		f.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	return f, nil
}

// PortURL is where the fake serves a sandbox's port (the real
// https://<port>-<id>.<domain> cannot resolve on loopback): a proxy to
// the port on the host, which the fake's sandboxes share, that checks
// the traffic token when the sandbox has one.
func (f *Fake) PortURL(id string, port int) string {
	return f.URL() + "/_port/" + id + "/" + strconv.Itoa(port)
}

func (f *Fake) proxyPort(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	sb, ok := f.sbs[r.PathValue("id")]
	f.mu.Unlock()
	port, err := strconv.Atoi(r.PathValue("port"))
	if !ok || err != nil || sb.paused {
		writeError(w, http.StatusBadGateway, "The sandbox is not running or was not found")
		return
	}
	if sb.traffic != "" && r.Header.Get(e2b.HeaderTrafficToken) != sb.traffic {
		writeError(w, http.StatusForbidden, "missing or invalid traffic access token")
		return
	}
	target := &url.URL{Scheme: "http", Host: "127.0.0.1:" + strconv.Itoa(port)}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.URL.Path = "/" + r.PathValue("rest")
		pr.Out.URL.RawPath = ""
	}}
	rp.ServeHTTP(w, r)
}

// URL is both the API URL and the sandbox (envd) URL.
func (f *Fake) URL() string { return f.Server.URL() }

// Domain is the sandbox domain the answers report.
func (f *Fake) Domain() string { return f.opts.Domain }

// Metadata returns a sandbox's metadata (nil when it does not exist).
func (f *Fake) Metadata(id string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sb, ok := f.sbs[id]; ok {
		return maps.Clone(sb.metadata)
	}
	return nil
}

// Paused reports whether the sandbox is paused.
func (f *Fake) Paused(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.sbs[id]
	return ok && sb.paused
}

// SetPaused pauses or resumes a sandbox as E2B's auto-pause would.
func (f *Fake) SetPaused(id string, paused bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sb, ok := f.sbs[id]; ok {
		sb.paused = paused
	}
}

// Snapshots returns the ids of the snapshots that exist.
func (f *Fake) Snapshots() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.snaps))
}

// EndAt returns when the sandbox would expire.
func (f *Fake) EndAt(id string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if sb, ok := f.sbs[id]; ok {
		return sb.endAt
	}
	return time.Time{}
}

// writeError answers E2B's error body.
func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	fakecloud.WriteJSON(w, status, e2b.ErrorBody{Code: status, Message: fmt.Sprintf(format, args...)})
}

func (f *Fake) apiAuth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(e2b.HeaderAPIKey) != f.opts.APIKey {
			writeError(w, http.StatusUnauthorized, "Invalid API key, it must start with 'e2b_' prefix and be followed by 40 hexadecimal characters")
			return
		}
		h(w, r)
	}
}

func token(prefix string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// decode reads a JSON body leniently (the SDK sends fields the fake does
// not model, such as mcp or iam); an empty body is {}.
func decode(r *http.Request, v any) error {
	if r.ContentLength == 0 {
		return nil
	}
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil && err.Error() != "EOF" {
		return fmt.Errorf("bad JSON body: %w", err)
	}
	return nil
}

func (f *Fake) wire(id string, sb *sandbox) e2b.Sandbox {
	var traffic *string
	if sb.traffic != "" {
		t := sb.traffic
		traffic = &t
	}
	d := f.opts.Domain
	return e2b.Sandbox{TemplateID: sb.template, SandboxID: id, Alias: sb.alias, ClientID: "6532622b",
		EnvdVersion: "0.5.7", EnvdAccessToken: sb.token, TrafficAccessToken: traffic, Domain: &d}
}

func (f *Fake) detail(id string, sb *sandbox, tokens bool) e2b.SandboxDetail {
	d := f.opts.Domain
	state := "running"
	if sb.paused {
		state = "paused"
	}
	out := e2b.SandboxDetail{TemplateID: sb.template, Alias: sb.alias, SandboxID: id, ClientID: "6532622b",
		StartedAt: sb.started, EndAt: sb.endAt, EnvdVersion: "0.5.7", CPUCount: 2, MemoryMB: 512, DiskSizeMB: 512,
		Metadata: maps.Clone(sb.metadata), State: state}
	if tokens {
		out.EnvdAccessToken, out.Domain, out.AllowInternetAccess = sb.token, &d, sb.internet
	}
	return out
}

// template resolves a templateID: a known template, or a snapshot by id
// or name (with or without its tag).
func (f *Fake) template(id string) (snap *snapshot, ok bool) {
	if slices.Contains(f.opts.Templates, id) {
		return nil, true
	}
	for _, s := range f.snaps {
		if s.id == id || strings.TrimSuffix(s.id, ":default") == id {
			return s, true
		}
		for _, n := range s.names {
			if n == id || strings.TrimSuffix(n, ":default") == id || strings.TrimPrefix(strings.TrimSuffix(n, ":default"), "fake-team/") == id {
				return s, true
			}
		}
	}
	return nil, false
}

func (f *Fake) create(w http.ResponseWriter, r *http.Request) {
	var req e2b.NewSandbox
	if err := decode(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if req.TemplateID == "" {
		writeError(w, http.StatusBadRequest, "templateID is required")
		return
	}
	f.mu.Lock()
	snap, ok := f.template(req.TemplateID)
	f.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "template '%s' not found", req.TemplateID)
		return
	}
	timeout := req.Timeout
	if timeout == 0 {
		timeout = 15
	}
	id, sb, err := f.newSandbox(req.TemplateID, timeout, req.Metadata, req.EnvVars, snap)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	sb.internet = req.AllowInternetAccess
	if req.Network != nil && req.Network.AllowPublicTraffic != nil && !*req.Network.AllowPublicTraffic {
		sb.traffic = token("")
	}
	fakecloud.WriteJSON(w, http.StatusCreated, f.wire(id, sb))
}

func (f *Fake) newSandbox(template string, timeout int, meta, env map[string]string, snap *snapshot) (string, *sandbox, error) {
	fc, err := f.CreateSandbox("", nil)
	if err != nil {
		return "", nil, err
	}
	if snap != nil {
		for _, d := range []string{"home", "workspace"} {
			if out, err := exec.Command("cp", "-a", snap.dir+"/"+d+"/.", fc.Dir+"/"+d+"/").CombinedOutput(); err != nil {
				return "", nil, fmt.Errorf("restoring snapshot: %v: %s", err, out)
			}
		}
	}
	now := time.Now().UTC()
	sb := &sandbox{fc: fc, template: template, metadata: maps.Clone(meta), envVars: maps.Clone(env),
		started: now, endAt: now.Add(time.Duration(timeout) * time.Second), token: token("ea_"), procs: map[int]*fproc{}}
	if snap == nil {
		sb.alias = template
	}
	f.mu.Lock()
	f.sbs[fc.ID] = sb
	f.mu.Unlock()
	return fc.ID, sb, nil
}

// lookup finds the sandbox of {id}, answering 404 when it is gone.
func (f *Fake) lookup(w http.ResponseWriter, r *http.Request) (string, *sandbox, bool) {
	id := r.PathValue("id")
	f.mu.Lock()
	sb, ok := f.sbs[id]
	f.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "sandbox \"%s\" doesn't exist or you don't have access to it", id)
	}
	return id, sb, ok
}

func (f *Fake) get(w http.ResponseWriter, r *http.Request) {
	id, sb, ok := f.lookup(w, r)
	if !ok {
		return
	}
	f.mu.Lock()
	d := f.detail(id, sb, true)
	f.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, d)
}

// list is GET /v2/sandboxes: metadata ("k=v&k2=v2", each URL-encoded),
// state (running,paused; default both), limit and nextToken.
func (f *Fake) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	want := map[string]string{}
	if m := q.Get("metadata"); m != "" {
		vals, err := url.ParseQuery(m)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid metadata query: %v", err)
			return
		}
		for k, v := range vals {
			want[k] = v[0]
		}
	}
	states := map[string]bool{"running": true, "paused": true}
	if s := q["state"]; len(s) > 0 {
		states = map[string]bool{}
		for _, v := range s {
			for _, st := range strings.Split(v, ",") {
				states[st] = true
			}
		}
	}
	f.mu.Lock()
	var out []e2b.SandboxDetail
	for id, sb := range f.sbs {
		d := f.detail(id, sb, false)
		if !states[d.State] {
			continue
		}
		match := true
		for k, v := range want {
			if sb.metadata[k] != v {
				match = false
			}
		}
		if match {
			out = append(out, d)
		}
	}
	f.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].StartedAt.After(out[j].StartedAt) })
	start := 0
	if t := q.Get("nextToken"); t != "" {
		start, _ = strconv.Atoi(t)
	}
	limit := 100
	if l, err := strconv.Atoi(q.Get("limit")); err == nil && l > 0 {
		limit = l
	}
	start = min(start, len(out))
	end := min(start+limit, len(out))
	if end < len(out) {
		w.Header().Set("X-Next-Token", strconv.Itoa(end))
	}
	page := out[start:end]
	if page == nil {
		page = []e2b.SandboxDetail{}
	}
	fakecloud.WriteJSON(w, http.StatusOK, page)
}

func (f *Fake) delete(w http.ResponseWriter, r *http.Request) {
	id, _, ok := f.lookup(w, r)
	if !ok {
		return
	}
	f.mu.Lock()
	delete(f.sbs, id)
	f.mu.Unlock()
	if _, err := f.DeleteSandbox(r.Context(), id); err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (f *Fake) timeout(w http.ResponseWriter, r *http.Request) {
	_, sb, ok := f.lookup(w, r)
	if !ok {
		return
	}
	var req e2b.TimeoutRequest
	if err := decode(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	f.mu.Lock()
	sb.endAt = time.Now().UTC().Add(time.Duration(req.Timeout) * time.Second)
	f.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (f *Fake) pause(w http.ResponseWriter, r *http.Request) {
	id, sb, ok := f.lookup(w, r)
	if !ok {
		return
	}
	var req e2b.PauseRequest
	if err := decode(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if sb.paused {
		writeError(w, http.StatusConflict, "sandbox %s is already paused", id)
		return
	}
	sb.paused = true
	w.WriteHeader(http.StatusNoContent)
}

func (f *Fake) connect(w http.ResponseWriter, r *http.Request) {
	id, sb, ok := f.lookup(w, r)
	if !ok {
		return
	}
	var req e2b.ConnectRequest
	if err := decode(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	f.mu.Lock()
	status := http.StatusOK
	if sb.paused {
		sb.paused, status = false, http.StatusCreated
	}
	if req.Timeout > 0 { // connect only extends the timeout
		if end := time.Now().UTC().Add(time.Duration(req.Timeout) * time.Second); end.After(sb.endAt) {
			sb.endAt = end
		}
	}
	out := f.wire(id, sb)
	f.mu.Unlock()
	fakecloud.WriteJSON(w, status, out)
}

func (f *Fake) network(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := f.lookup(w, r); ok {
		w.WriteHeader(http.StatusNoContent)
	}
}

// Close destroys every sandbox and snapshot and stops the server.
func (f *Fake) Close() {
	f.Server.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, s := range f.snaps {
		_ = os.RemoveAll(s.dir)
		delete(f.snaps, id)
	}
}
