// Package vercelfake is a loopback fake of the Vercel Sandbox API, built
// on internal/fakecloud, for the vercel provider's tests, cmd/corral's
// tests and the official SDK check. It speaks the part of the API that
// corral and @vercel/sandbox (3.x) use, with the paths, JSON field names,
// ids and error bodies the SDK's validators and Vercel's own mock
// (github.com/vercel/sandbox, packages/vercel-sandbox-mock) agree on:
//
//   - sandboxes by name: POST /v2/sandboxes (and /v3/sandboxes, where the
//     SDK sends a create without a runtime), GET /v2/sandboxes (project,
//     namePrefix, tags=key:value, limit, cursor), GET /v2/sandboxes/{name}
//     (resume=true starts a session for a stopped persistent sandbox),
//     PATCH and DELETE /v2/sandboxes/{name};
//   - sessions (one running VM of a sandbox): GET
//     /v2/sandboxes/sessions/{id}, POST …/stop, …/extend-timeout,
//     …/snapshot; commands: POST …/cmd (wait=true answers NDJSON: the
//     command, its log lines with logs=true, then the finished command),
//     GET …/cmd/{cmdId} (wait=true blocks until it exits), GET
//     …/cmd/{cmdId}/logs (NDJSON {stream: stdout|stderr, data}, followed
//     until the command ends), POST …/cmd/{cmdId}/kill {signal: <int>};
//     files: POST …/fs/mkdir (not recursive; an existing path is 400 "File
//     exists"), …/fs/read (404 with no body for a missing file,
//     application/octet-stream otherwise), …/fs/write (a gzipped tar
//     extracted under the x-cwd header);
//   - snapshots: GET|DELETE /v2/sandboxes/snapshots/{id}, GET
//     /v2/sandboxes/snapshots (name=).
//
// Every request needs Authorization: Bearer <token> and the teamId query
// of the fake's team (Team). Errors are {"error": {"code", "message"}}.
//
// Semantics kept from the real service: a sandbox is persistent storage
// plus at most one running session; stopping a session (stop, snapshot,
// the session's timeout) kills its processes and keeps the files of a
// persistent sandbox for the next session; a session route of a stopped
// session answers 410 sandbox_stopped (the SDK then resumes and retries);
// a non-persistent sandbox cannot be resumed (410). Taking a snapshot
// stops the session, as on Vercel. A command's kill signals its one pid
// (what the API starts), so a backgrounded grandchild survives it — the
// provider's kill goes through a second command instead. Routes for
// exposed ports are {url, subdomain, port}, the subdomain in Vercel's
// form; the fake's url is the loopback address of the port, so a test can
// reach it.
//
// Route names (for faults and counts): create, list, get, update, delete,
// session, stop, extend, snapshot, run, command, logs, kill, mkdir, read,
// write, getSnapshot, deleteSnapshot, listSnapshots.
package vercelfake

import (
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
)

// Team and Project are the team and project the fake's token belongs to.
const (
	Team    = "team_fakecorral0001"
	Project = "prj_fakecorral0001"
)

// Server is a running fake.
type Server struct {
	*fakecloud.Server

	mu        sync.Mutex
	sandboxes map[string]*sandbox // by name
	sessions  map[string]*session // by id
	commands  map[string]*command // by id
	snapshots map[string]*snapshot
	seq       int
}

type sandbox struct {
	sb         *fakecloud.Sandbox
	name       string
	persistent bool
	runtime    string
	timeout    int64
	ports      []int
	tags       map[string]string
	policy     *apiPolicy
	vcpus      int
	created    time.Time
	updated    time.Time
	current    *session
	snapshotID string
	sourceSnap string
}

type session struct {
	id       string
	sb       *sandbox
	status   string
	timeout  int64
	created  time.Time
	stopped  time.Time
	snapshot time.Time
	timer    *time.Timer
	cmds     []*command
}

type snapshot struct {
	id, sandbox, session string
	dir                  string // a copy of the sandbox's Root and Home
	size                 int64
	status               string
	created, updated     time.Time
	runtime              string
}

// New starts the fake with the kit's options (Token is the bearer token
// the fake accepts; Kill defaults to PIDOnly, the API's kill). Close it
// with Close.
func New(opts fakecloud.Options) (*Server, error) {
	if opts.IDPrefix == "" {
		opts.IDPrefix = "vsb-"
	}
	if opts.Kill == fakecloud.GroupKill {
		opts.Kill = fakecloud.PIDOnly
	}
	fs, err := fakecloud.New(opts)
	if err != nil {
		return nil, err
	}
	s := &Server{Server: fs, sandboxes: map[string]*sandbox{}, sessions: map[string]*session{},
		commands: map[string]*command{}, snapshots: map[string]*snapshot{}}
	s.Handle("create", "POST /v2/sandboxes", s.team(s.create))
	s.Handle("create", "POST /v3/sandboxes", s.team(s.create))
	s.Handle("list", "GET /v2/sandboxes", s.team(s.list))
	s.Handle("get", "GET /v2/sandboxes/{name}", s.team(s.get))
	s.Handle("update", "PATCH /v2/sandboxes/{name}", s.team(s.update))
	s.Handle("delete", "DELETE /v2/sandboxes/{name}", s.team(s.delete))
	s.Handle("session", "GET /v2/sandboxes/sessions/{sid}", s.team(s.withSession(false, s.getSession)))
	s.Handle("stop", "POST /v2/sandboxes/sessions/{sid}/stop", s.team(s.withSession(false, s.stopSession)))
	s.Handle("extend", "POST /v2/sandboxes/sessions/{sid}/extend-timeout", s.team(s.withSession(true, s.extend)))
	s.Handle("snapshot", "POST /v2/sandboxes/sessions/{sid}/snapshot", s.team(s.withSession(true, s.createSnapshot)))
	s.Handle("run", "POST /v2/sandboxes/sessions/{sid}/cmd", s.team(s.withSession(true, s.run)))
	s.Handle("command", "GET /v2/sandboxes/sessions/{sid}/cmd/{cmd}", s.team(s.withSession(false, s.getCommand)))
	s.Handle("logs", "GET /v2/sandboxes/sessions/{sid}/cmd/{cmd}/logs", s.team(s.withSession(false, s.logs)))
	s.Handle("kill", "POST /v2/sandboxes/sessions/{sid}/cmd/{cmd}/kill", s.team(s.withSession(true, s.kill)))
	s.Handle("mkdir", "POST /v2/sandboxes/sessions/{sid}/fs/mkdir", s.team(s.withSession(true, s.mkdir)))
	s.Handle("read", "POST /v2/sandboxes/sessions/{sid}/fs/read", s.team(s.withSession(true, s.read)))
	s.Handle("write", "POST /v2/sandboxes/sessions/{sid}/fs/write", s.team(s.withSession(true, s.write)))
	s.Handle("listSnapshots", "GET /v2/sandboxes/snapshots", s.team(s.listSnapshots))
	s.Handle("getSnapshot", "GET /v2/sandboxes/snapshots/{id}", s.team(s.getSnapshot))
	s.Handle("deleteSnapshot", "DELETE /v2/sandboxes/snapshots/{id}", s.team(s.deleteSnapshot))
	return s, nil
}

// APIURL is the API's root (the SDK's https://vercel.com/api).
func (s *Server) APIURL() string { return s.URL() }

// Close stops every session, destroys every sandbox and snapshot and
// stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	var dirs []string
	for _, sn := range s.snapshots {
		dirs = append(dirs, sn.dir)
	}
	for _, se := range s.sessions {
		if se.timer != nil {
			se.timer.Stop()
		}
	}
	s.mu.Unlock()
	s.Server.Close()
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}

// Names returns the names of the sandboxes that exist.
func (s *Server) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for n := range s.sandboxes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Sandbox returns the fake sandbox (its host directories) named name.
func (s *Server) Sandbox(name string) (*fakecloud.Sandbox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[name]
	if !ok {
		return nil, false
	}
	return sb.sb, true
}

// StopSession stops the running session of the sandbox name, as its
// timeout would (its processes are killed; a persistent sandbox keeps its
// files). It reports whether there was one.
func (s *Server) StopSession(name string) bool {
	s.mu.Lock()
	sb, ok := s.sandboxes[name]
	var se *session
	if ok && sb.current != nil && sb.current.status == "running" {
		se = sb.current
	}
	s.mu.Unlock()
	if se == nil {
		return false
	}
	s.stop(se, "stopped")
	return true
}

// apiError answers {"error": {"code", "message"}}, Vercel's error body.
func apiError(w http.ResponseWriter, status int, code, format string, args ...any) {
	fakecloud.WriteJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": fmt.Sprintf(format, args...)}})
}

// team checks the teamId query the API needs beside the token.
func (s *Server) team(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if t := r.URL.Query().Get("teamId"); t != Team {
			apiError(w, http.StatusForbidden, "forbidden", "Not authorized: the token has no access to team %q", t)
			return
		}
		h(w, r)
	}
}

func (s *Server) newID(prefix string) string {
	s.seq++
	return fmt.Sprintf("%s_%s%04d", prefix, randHex(10), s.seq)
}

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// sessionJSON is the API's Session.
func (se *session) json() map[string]any {
	m := map[string]any{"id": se.id, "memory": 2048 * se.sb.vcpus, "vcpus": se.sb.vcpus, "region": "iad1",
		"timeout": se.timeout, "status": se.status, "requestedAt": millis(se.created), "startedAt": millis(se.created),
		"createdAt": millis(se.created), "updatedAt": millis(time.Now()), "cwd": se.sb.sb.Root}
	if se.sb.runtime != "" {
		m["runtime"] = se.sb.runtime
	}
	if !se.stopped.IsZero() {
		m["stoppedAt"], m["requestedStopAt"] = millis(se.stopped), millis(se.stopped)
		m["duration"] = se.stopped.Sub(se.created).Milliseconds()
	}
	if !se.snapshot.IsZero() {
		m["snapshottedAt"] = millis(se.snapshot)
	}
	if se.sb.sourceSnap != "" {
		m["sourceSnapshotId"] = se.sb.sourceSnap
	}
	if p := policyJSON(se.sb.policy); p != nil {
		m["networkPolicy"] = p
	}
	return m
}

// policyJSON is the policy as the API answers it ({mode} or "custom").
func policyJSON(p *apiPolicy) any {
	if p == nil {
		return nil
	}
	return p
}

// sandboxJSON is the API's Sandbox.
func (sb *sandbox) json() map[string]any {
	m := map[string]any{"name": sb.name, "persistent": sb.persistent, "region": "iad1", "vcpus": sb.vcpus,
		"memory": 2048 * sb.vcpus, "timeout": sb.timeout, "createdAt": millis(sb.created), "updatedAt": millis(sb.updated),
		"currentSessionId": sb.current.id, "status": sb.current.status, "statusUpdatedAt": millis(sb.updated), "cwd": sb.sb.Root}
	if sb.runtime != "" {
		m["runtime"] = sb.runtime
	}
	if len(sb.tags) > 0 {
		m["tags"] = sb.tags
	}
	if sb.snapshotID != "" {
		m["currentSnapshotId"] = sb.snapshotID
	}
	if p := policyJSON(sb.policy); p != nil {
		m["networkPolicy"] = p
	}
	return m
}

// routes are the exposed ports: Vercel's subdomain, the port's loopback
// URL.
func (sb *sandbox) routes() []map[string]any {
	out := []map[string]any{}
	for _, p := range sb.ports {
		sub := strings.ToLower(strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
				return r
			}
			return '-'
		}, sb.name)) + "-" + strconv.Itoa(p)
		out = append(out, map[string]any{"url": "http://127.0.0.1:" + strconv.Itoa(p), "subdomain": sub, "port": p})
	}
	return out
}

func (sb *sandbox) answer(resumed bool) map[string]any {
	return map[string]any{"sandbox": sb.json(), "session": sb.current.json(), "routes": sb.routes(), "resumed": resumed}
}

func (s *Server) snapshotJSON(sn *snapshot) map[string]any {
	return map[string]any{"id": sn.id, "sourceSessionId": sn.session, "region": "iad1", "regions": []string{"iad1"},
		"status": sn.status, "sizeBytes": sn.size, "createdAt": millis(sn.created), "updatedAt": millis(sn.updated)}
}

// LastCommand returns the session and id of the newest command of the
// sandbox name's current session.
func (s *Server) LastCommand(name string) (sid, id string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.sandboxes[name]
	if sb == nil || len(sb.current.cmds) == 0 {
		return "", "", false
	}
	c := sb.current.cmds[len(sb.current.cmds)-1]
	return sb.current.id, c.id, true
}
