// Package railwayfake is a loopback fake of Railway's sandbox API for
// tests: the GraphQL operations the official `railway` SDK (3.11) sends to
// backboard (/graphql/v2), and the tcp-proxy WebSockets it opens for exec
// (/ws/exec, subprotocols "railway-shell" and a shell token) and files
// (/ws/files). Sandboxes are real host processes (internal/fakecloud) with
// Railway's semantics: opaque UUID ids, status RUNNING until destroyed, a
// missing sandbox read as null, checkpoints (environment-scoped names) a
// new sandbox boots from, live disk forks, the idle timeout that destroys a
// sandbox (IdleSweep), exec sessions that outlive their connection
// (durable sessions), signals to the process group, and a signalled
// process reported as exit code -1.
package railwayfake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
)

// Options configure a Fake.
type Options struct {
	// Token is the credential every GraphQL call must carry, as
	// "Authorization: Bearer" (account or workspace token) or
	// "project-access-token" (project token). Required.
	Token string
	// EnvironmentID is the one environment the token reaches. Default
	// "env-fake".
	EnvironmentID string
	// Now is the fake's clock (createdAt, idle). Default time.Now.
	Now func() time.Time
}

// Fake is the fake Railway backend.
type Fake struct {
	*fakecloud.Server
	opts Options

	mu          sync.Mutex
	boxes       map[string]*box
	tokens      map[string]shellToken
	checkpoints map[string]*checkpoint // by id
	heartbeats  int
}

type box struct {
	sb        *fakecloud.Sandbox
	status    string
	region    string
	isolation string
	idle      *int
	created   time.Time
	active    time.Time // last exec or files activity
	vars      map[string]string
	sessions  map[string]*session
	live      int // open exec and files connections
}

type checkpoint struct {
	ID, Key, Env string
	Created      time.Time
	dir          string // a copy of the sandbox's directory
}

type shellToken struct {
	env, sandbox, scope string
}

// New starts the fake; t.Cleanup(f.Close).
func New(opts Options) (*Fake, error) {
	if opts.EnvironmentID == "" {
		opts.EnvironmentID = "env-fake"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s, err := fakecloud.New(fakecloud.Options{Kill: fakecloud.GroupKill, IDPrefix: "rw-"})
	if err != nil {
		return nil, err
	}
	f := &Fake{Server: s, opts: opts, boxes: map[string]*box{}, tokens: map[string]shellToken{}, checkpoints: map[string]*checkpoint{}}
	s.Handle("graphql", "POST /graphql/v2", f.graphql)
	s.Handle("exec", "GET /ws/exec", f.execWS)
	s.Handle("files", "GET /ws/files", f.filesWS)
	return f, nil
}

// GraphQLURL is the endpoint to give the SDK (RAILWAY_GRAPHQL_ENDPOINT)
// and the provider.
func (f *Fake) GraphQLURL() string { return f.URL() + "/graphql/v2" }

// ExecWSURL is the tcp-proxy exec endpoint (RAILWAY_TCP_PROXY_WS_ENDPOINT).
func (f *Fake) ExecWSURL() string { return "ws" + strings.TrimPrefix(f.URL(), "http") + "/ws/exec" }

// EnvironmentID is the fake's environment.
func (f *Fake) EnvironmentID() string { return f.opts.EnvironmentID }

// Heartbeats counts the heartbeat execs (a command that is exactly
// "true") the fake has run.
func (f *Fake) Heartbeats() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.heartbeats
}

// Vars returns the variables a sandbox was created with (nil when gone).
func (f *Fake) Vars(id string) map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.boxes[id]; ok {
		return b.vars
	}
	return nil
}

// Procs counts the processes alive in sandbox id (-1 when it is gone).
func (f *Fake) Procs(id string) int {
	f.mu.Lock()
	b, ok := f.boxes[id]
	f.mu.Unlock()
	if !ok {
		return -1
	}
	return b.sb.Procs()
}

// Live counts the sandboxes that exist.
func (f *Fake) Live() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.boxes)
}

// IdleSweep destroys, as Railway does, every sandbox whose idle timeout
// has passed at now since its last activity (an exec or files
// connection opened, a frame received); a sandbox with an open
// connection is not idle. It returns the ids destroyed.
func (f *Fake) IdleSweep(ctx context.Context, now time.Time) []string {
	f.mu.Lock()
	var ids []string
	for id, b := range f.boxes {
		mins := 30
		if b.idle != nil {
			mins = *b.idle
		}
		if mins == 0 || b.live > 0 {
			continue
		}
		if now.Sub(b.active) >= time.Duration(mins)*time.Minute {
			ids = append(ids, id)
		}
	}
	f.mu.Unlock()
	sort.Strings(ids)
	for _, id := range ids {
		f.destroy(ctx, id)
	}
	return ids
}

func (f *Fake) touch(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if b, ok := f.boxes[id]; ok {
		b.active = f.opts.Now()
	}
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// gqlError writes a GraphQL error answer: HTTP 200 with errors, as
// backboard answers a resolver's refusal ("Not Authorized", "… not
// found").
func gqlError(w http.ResponseWriter, status int, msg string) {
	fakecloud.WriteJSON(w, status, map[string]any{"data": nil, "errors": []map[string]any{{"message": msg}}})
}

var opRE = regexp.MustCompile(`^\s*(query|mutation)\s+(\w+)`)

func (f *Fake) authorized(r *http.Request) bool {
	return r.Header.Get("Authorization") == "Bearer "+f.opts.Token || r.Header.Get("Project-Access-Token") == f.opts.Token
}

// sandboxJSON is RailwaySandboxFields.
func (f *Fake) sandboxJSON(id string, b *box) map[string]any {
	return map[string]any{"id": id, "status": b.status, "networkIsolation": b.isolation, "environmentId": f.opts.EnvironmentID,
		"region": b.region, "idleTimeoutMinutes": b.idle, "createdAt": b.created.UTC().Format(time.RFC3339Nano)}
}

func (f *Fake) graphql(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil || json.Unmarshal(body, &req) != nil {
		gqlError(w, http.StatusBadRequest, "Invalid JSON body")
		return
	}
	if !f.authorized(r) {
		gqlError(w, http.StatusOK, "Not Authorized")
		return
	}
	m := opRE.FindStringSubmatch(req.Query)
	if m == nil {
		gqlError(w, http.StatusBadRequest, "Must provide an operation name")
		return
	}
	v := req.Variables
	str := func(k string) string { s, _ := v[k].(string); return s }
	if env := str("environmentId"); env != "" && env != f.opts.EnvironmentID {
		gqlError(w, http.StatusOK, "Not Authorized")
		return
	}
	data, msg := f.operation(r.Context(), m[2], v, str)
	if msg != "" {
		gqlError(w, http.StatusOK, msg)
		return
	}
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"data": data})
}

func (f *Fake) operation(ctx context.Context, op string, v map[string]any, str func(string) string) (map[string]any, string) {
	switch op {
	case "RailwaySandbox":
		f.mu.Lock()
		defer f.mu.Unlock()
		b, ok := f.boxes[str("id")]
		if !ok {
			return map[string]any{"sandbox": nil}, ""
		}
		return map[string]any{"sandbox": f.sandboxJSON(str("id"), b)}, ""
	case "RailwaySandboxes":
		f.mu.Lock()
		defer f.mu.Unlock()
		ids := make([]string, 0, len(f.boxes))
		for id := range f.boxes {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool {
			a, b := f.boxes[ids[i]].created, f.boxes[ids[j]].created
			return a.Before(b) || a.Equal(b) && ids[i] < ids[j]
		})
		// A Relay connection: first (default and cap 100) after the
		// cursor, which is the last edge's id.
		start := 0
		if after := str("after"); after != "" {
			for i, id := range ids {
				if id == after {
					start = i + 1
				}
			}
		}
		n := 100
		if fv, ok := v["first"].(float64); ok && int(fv) > 0 && int(fv) < n {
			n = int(fv)
		}
		end := min(start+n, len(ids))
		edges := []any{}
		var cursor any
		for _, id := range ids[start:end] {
			edges = append(edges, map[string]any{"node": f.sandboxJSON(id, f.boxes[id])})
			cursor = id
		}
		return map[string]any{"sandboxes": map[string]any{"edges": edges, "pageInfo": map[string]any{"hasNextPage": end < len(ids), "endCursor": cursor}}}, ""
	case "RailwaySandboxCreate":
		in, _ := v["input"].(map[string]any)
		return f.create(in)
	case "RailwaySandboxDestroy":
		f.mu.Lock()
		b, ok := f.boxes[str("id")]
		var out map[string]any
		if ok {
			out = f.sandboxJSON(str("id"), b)
			out["status"] = "DESTROYING"
		}
		f.mu.Unlock()
		if !ok {
			return nil, fmt.Sprintf("Sandbox %s not found", str("id"))
		}
		f.destroy(ctx, str("id"))
		return map[string]any{"sandboxDestroy": out}, ""
	case "RailwayGenerateShellToken":
		in, _ := v["input"].(map[string]any)
		id, _ := in["instanceId"].(string)
		kind, _ := in["kind"].(string)
		scope, _ := in["scope"].(string)
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := f.boxes[id]; !ok || kind != "sandbox" {
			return nil, fmt.Sprintf("Sandbox %s not found", id)
		}
		tok := "jwt." + strings.ReplaceAll(newUUID(), "-", "")
		f.tokens[tok] = shellToken{env: f.opts.EnvironmentID, sandbox: id, scope: scope}
		return map[string]any{"generateShellToken": tok}, ""
	case "RailwaySandboxCheckpointCreate":
		return f.checkpointCreate(str("sandboxId"), str("name"))
	case "RailwaySandboxCheckpoints":
		f.mu.Lock()
		defer f.mu.Unlock()
		out := []any{}
		cps := make([]*checkpoint, 0, len(f.checkpoints))
		for _, c := range f.checkpoints {
			cps = append(cps, c)
		}
		sort.Slice(cps, func(i, j int) bool { return cps[i].Created.After(cps[j].Created) })
		for _, c := range cps {
			out = append(out, c.json())
		}
		return map[string]any{"sandboxCheckpoints": out}, ""
	case "RailwaySandboxCheckpointDelete":
		f.mu.Lock()
		c, ok := f.checkpoints[str("id")]
		delete(f.checkpoints, str("id"))
		f.mu.Unlock()
		if !ok {
			return nil, fmt.Sprintf("Checkpoint %s not found", str("id"))
		}
		_ = os.RemoveAll(c.dir)
		return map[string]any{"sandboxCheckpointDelete": true}, ""
	case "RailwaySandboxCheckpointRename":
		f.mu.Lock()
		defer f.mu.Unlock()
		c, ok := f.checkpoints[str("id")]
		if !ok {
			return nil, fmt.Sprintf("Checkpoint %s not found", str("id"))
		}
		c.Key = str("name")
		return map[string]any{"sandboxCheckpointRename": c.json()}, ""
	}
	return nil, fmt.Sprintf("Cannot query field %q", op)
}

func (c *checkpoint) json() map[string]any {
	return map[string]any{"id": c.ID, "key": c.Key, "environmentId": c.Env, "createdAt": c.Created.UTC().Format(time.RFC3339Nano)}
}

func (f *Fake) create(in map[string]any) (map[string]any, string) {
	var from string // a directory whose workspace and home seed the new sandbox
	if src, _ := in["sourceSandboxId"].(string); src != "" {
		f.mu.Lock()
		b, ok := f.boxes[src]
		f.mu.Unlock()
		if !ok {
			return nil, fmt.Sprintf("Sandbox %s not found", src)
		}
		from = b.sb.Dir
	}
	if t, ok := in["template"].(map[string]any); ok {
		name, _ := t["name"].(string)
		if name == "" {
			return nil, "Template builds are not supported by this fake"
		}
		f.mu.Lock()
		for _, c := range f.checkpoints {
			if c.Key == name {
				from = c.dir
			}
		}
		f.mu.Unlock()
		if from == "" {
			return nil, fmt.Sprintf("Checkpoint %q not found", name)
		}
	}
	isolation := "ISOLATED"
	if s, _ := in["networkIsolation"].(string); s != "" {
		if s != "ISOLATED" && s != "PRIVATE" {
			return nil, fmt.Sprintf("Invalid networkIsolation %q", s)
		}
		isolation = s
	}
	region, _ := in["region"].(string)
	if region == "" {
		region = "us-west2"
	}
	id := newUUID()
	sb, err := f.CreateSandbox(id, nil)
	if err != nil {
		return nil, "Failed to create sandbox"
	}
	if from != "" {
		for _, d := range []string{"workspace", "home"} {
			if err := copyTree(filepath.Join(from, d), filepath.Join(sb.Dir, d)); err != nil {
				return nil, "Failed to restore sandbox disk"
			}
		}
	}
	b := &box{sb: sb, status: "RUNNING", region: region, isolation: isolation, created: f.opts.Now(), sessions: map[string]*session{}, vars: map[string]string{}}
	b.active = b.created
	if n, ok := in["idleTimeoutMinutes"].(float64); ok {
		m := int(n)
		b.idle = &m
	}
	if vars, ok := in["variables"].(map[string]any); ok {
		for k, v := range vars {
			b.vars[k], _ = v.(string)
		}
	}
	f.mu.Lock()
	f.boxes[id] = b
	out := f.sandboxJSON(id, b)
	f.mu.Unlock()
	return map[string]any{"sandboxCreate": out}, ""
}

func (f *Fake) checkpointCreate(id, name string) (map[string]any, string) {
	f.mu.Lock()
	b, ok := f.boxes[id]
	f.mu.Unlock()
	if !ok {
		return nil, fmt.Sprintf("Sandbox %s not found", id)
	}
	if strings.TrimSpace(name) == "" {
		return nil, "Checkpoint name must not be empty"
	}
	dir, err := os.MkdirTemp("", "railwayfake-cp-")
	if err != nil {
		return nil, "Failed to create checkpoint"
	}
	for _, d := range []string{"workspace", "home"} {
		if err := copyTree(filepath.Join(b.sb.Dir, d), filepath.Join(dir, d)); err != nil {
			return nil, "Failed to create checkpoint"
		}
	}
	c := &checkpoint{ID: newUUID(), Key: name, Env: f.opts.EnvironmentID, Created: f.opts.Now(), dir: dir}
	f.mu.Lock()
	for cid, old := range f.checkpoints { // names are environment-scoped: a capture replaces
		if old.Key == name {
			delete(f.checkpoints, cid)
			_ = os.RemoveAll(old.dir)
		}
	}
	f.checkpoints[c.ID] = c
	f.mu.Unlock()
	return map[string]any{"sandboxCheckpointCreate": c.json()}, ""
}

// Checkpoints returns the names of the environment's checkpoints.
func (f *Fake) Checkpoints() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.checkpoints {
		out = append(out, c.Key)
	}
	sort.Strings(out)
	return out
}

func (f *Fake) destroy(ctx context.Context, id string) {
	f.mu.Lock()
	delete(f.boxes, id)
	f.mu.Unlock()
	_, _ = f.DeleteSandbox(ctx, id)
}

// Close destroys every sandbox and checkpoint and stops the server.
func (f *Fake) Close() {
	f.mu.Lock()
	cps := f.checkpoints
	f.checkpoints = map[string]*checkpoint{}
	f.mu.Unlock()
	for _, c := range cps {
		_ = os.RemoveAll(c.dir)
	}
	f.Server.Close()
}

// copyTree copies src into dst (files, directories, links; modes kept).
func copyTree(src, dst string) error {
	return filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		t := filepath.Join(dst, rel)
		switch {
		case info.Mode()&os.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(l, t)
		case info.IsDir():
			return os.MkdirAll(t, info.Mode().Perm())
		case info.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(t, data, info.Mode().Perm())
		}
		return nil
	})
}
