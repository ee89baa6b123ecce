package vercelfake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/d10ffeed/corral/internal/fakecloud"
)

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// createBody is what POST /v2/sandboxes takes (the SDK's createSandbox).
type createBody struct {
	ProjectID          string               `json:"projectId"`
	Name               string               `json:"name"`
	Ports              []int                `json:"ports"`
	Source             *source              `json:"source"`
	Timeout            int64                `json:"timeout"`
	Resources          *struct{ Vcpus int } `json:"resources"`
	Runtime            string               `json:"runtime"`
	Image              string               `json:"image"`
	Persistent         *bool                `json:"persistent"`
	NetworkPolicy      json.RawMessage      `json:"networkPolicy"`
	Env                map[string]string    `json:"env"`
	Tags               map[string]string    `json:"tags"`
	SnapshotExpiration *int64               `json:"snapshotExpiration"`
	KeepLastSnapshots  json.RawMessage      `json:"keepLastSnapshots"`
	Region             string               `json:"region"`
	FailoverRegions    []string             `json:"failoverRegions"`
	Mounts             json.RawMessage      `json:"mounts"`
	NetworkID          string               `json:"networkId"`
}

type source struct {
	Type       string `json:"type"`
	SnapshotID string `json:"snapshotId"`
	URL        string `json:"url"`
}

var runtimes = map[string]bool{"node24": true, "node22": true, "python3.13": true}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var body createBody
	if err := fakecloud.DecodeJSON(r, &body); err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", "%v", err)
		return
	}
	if body.ProjectID != Project {
		apiError(w, http.StatusNotFound, "not_found", "Project not found: %q", body.ProjectID)
		return
	}
	if body.Runtime != "" && !runtimes[body.Runtime] {
		apiError(w, http.StatusBadRequest, "bad_request", "Invalid runtime %q: expected one of node24, node22, python3.13", body.Runtime)
		return
	}
	if body.Runtime == "" && body.Image == "" && r.URL.Path == "/v2/sandboxes" {
		body.Runtime = "node24"
	}
	if body.Source != nil && body.Source.Type != "snapshot" {
		apiError(w, http.StatusBadRequest, "bad_request", "the fake restores snapshot sources only, not %q", body.Source.Type)
		return
	}
	policy, err := parsePolicy(body.NetworkPolicy)
	if err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", "%v", err)
		return
	}
	name := body.Name
	if name == "" {
		name = "sandbox-" + randHex(12)
	}
	s.mu.Lock()
	if _, ok := s.sandboxes[name]; ok {
		s.mu.Unlock()
		apiError(w, http.StatusConflict, "conflict", "A sandbox named %q already exists in this project", name)
		return
	}
	var snap *snapshot
	if body.Source != nil {
		snap = s.snapshots[body.Source.SnapshotID]
		if snap == nil || snap.status != "created" {
			s.mu.Unlock()
			apiError(w, http.StatusGone, "snapshot_not_found", "Snapshot not found: %s", body.Source.SnapshotID)
			return
		}
	}
	s.mu.Unlock()
	fsb, err := s.CreateSandbox(name, body.Tags)
	if err != nil {
		apiError(w, http.StatusConflict, "conflict", "%v", err)
		return
	}
	if snap != nil {
		if err := restoreDir(snap.dir, fsb); err != nil {
			_, _ = s.DeleteSandbox(context.Background(), fsb.ID)
			apiError(w, http.StatusInternalServerError, "internal_error", "restore: %v", err)
			return
		}
	}
	now := time.Now()
	sb := &sandbox{sb: fsb, name: name, persistent: body.Persistent == nil || *body.Persistent, runtime: body.Runtime,
		timeout: body.Timeout, ports: body.Ports, tags: body.Tags, policy: policy, vcpus: 2, created: now, updated: now}
	if body.Persistent == nil {
		// @vercel/sandbox 3.x: sandboxes are persistent unless told.
		sb.persistent = true
	}
	if body.Resources != nil && body.Resources.Vcpus > 0 {
		sb.vcpus = body.Resources.Vcpus
	}
	if sb.timeout <= 0 {
		sb.timeout = 300_000
	}
	if snap != nil {
		sb.sourceSnap, sb.runtime = snap.id, snap.runtime
	}
	s.mu.Lock()
	s.sandboxes[name] = sb
	s.startSession(sb)
	ans := sb.answer(false)
	s.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, ans)
}

// startSession starts a running session of sb; s.mu is held.
func (s *Server) startSession(sb *sandbox) *session {
	se := &session{id: s.newID("sbx"), sb: sb, status: "running", timeout: sb.timeout, created: time.Now()}
	s.sessions[se.id] = se
	sb.current, sb.updated = se, time.Now()
	s.arm(se)
	return se
}

// arm (re)starts the session's timeout; s.mu is held.
func (s *Server) arm(se *session) {
	if se.timer != nil {
		se.timer.Stop()
	}
	left := time.Duration(se.timeout)*time.Millisecond - time.Since(se.created)
	se.timer = time.AfterFunc(max(left, 0), func() { s.stop(se, "stopped") })
}

// stop ends a session: its processes are killed (group SIGKILL, as a VM
// going away).
func (s *Server) stop(se *session, status string) {
	s.mu.Lock()
	if se.status != "running" {
		s.mu.Unlock()
		return
	}
	se.status, se.stopped = status, time.Now()
	se.sb.updated = se.stopped
	if se.timer != nil {
		se.timer.Stop()
	}
	cmds := append([]*command(nil), se.cmds...)
	s.mu.Unlock()
	for _, c := range cmds {
		if c.proc != nil && c.proc.PID() > 0 {
			_ = syscall.Kill(-c.proc.PID(), syscall.SIGKILL)
		}
	}
	for _, c := range cmds {
		if c.proc != nil {
			select {
			case <-c.proc.Done():
			case <-time.After(10 * time.Second):
			}
		}
	}
}

func (s *Server) lookup(w http.ResponseWriter, r *http.Request) *sandbox {
	name := r.PathValue("name")
	s.mu.Lock()
	sb := s.sandboxes[name]
	s.mu.Unlock()
	if sb == nil {
		apiError(w, http.StatusNotFound, "not_found", "Sandbox not found: %s", name)
	}
	return sb
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	resumed := false
	if r.URL.Query().Get("resume") == "true" && sb.current.status != "running" {
		if !sb.persistent {
			apiError(w, http.StatusGone, "sandbox_stopped", "Sandbox %s is stopped and not persistent: it cannot be resumed", sb.name)
			return
		}
		s.startSession(sb)
		resumed = true
	}
	fakecloud.WriteJSON(w, http.StatusOK, sb.answer(resumed))
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if p := q.Get("project"); p != "" && p != Project {
		apiError(w, http.StatusNotFound, "not_found", "Project not found: %q", p)
		return
	}
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 || limit > 100 {
		limit = 50
	}
	s.mu.Lock()
	var all []*sandbox
	for _, sb := range s.sandboxes {
		if p := q.Get("namePrefix"); p != "" && !strings.HasPrefix(sb.name, p) {
			continue
		}
		ok := true
		for _, t := range q["tags"] {
			k, v, _ := strings.Cut(t, ":")
			if sb.tags[k] != v {
				ok = false
			}
		}
		if ok {
			all = append(all, sb)
		}
	}
	asc := q.Get("sortOrder") == "asc"
	sort.Slice(all, func(i, j int) bool {
		if asc {
			return all[i].created.Before(all[j].created)
		}
		return all[i].created.After(all[j].created)
	})
	start, _ := strconv.Atoi(q.Get("cursor"))
	start = min(max(start, 0), len(all))
	end := min(start+limit, len(all))
	page := []map[string]any{}
	for _, sb := range all[start:end] {
		page = append(page, sb.json())
	}
	s.mu.Unlock()
	var next any
	if end < len(all) {
		next = strconv.Itoa(end)
	}
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"sandboxes": page, "pagination": map[string]any{"count": len(page), "next": next}})
}

func (s *Server) update(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	var body struct {
		createBody
		CurrentSnapshotID string `json:"currentSnapshotId"`
	}
	if err := fakecloud.DecodeJSON(r, &body); err != nil {
		apiError(w, http.StatusBadRequest, "bad_request", "%v", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if body.Ports != nil {
		if len(body.Ports) > 4 {
			apiError(w, http.StatusBadRequest, "bad_request", "A sandbox exposes at most 4 ports")
			return
		}
		sb.ports = body.Ports
	}
	if body.Timeout > 0 {
		sb.timeout = body.Timeout
	}
	if body.Tags != nil {
		sb.tags = body.Tags
	}
	if body.Persistent != nil {
		sb.persistent = *body.Persistent
	}
	sb.updated = time.Now()
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"sandbox": sb.json(), "routes": sb.routes()})
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	sb := s.lookup(w, r)
	if sb == nil {
		return
	}
	s.stop(sb.current, "stopped")
	s.mu.Lock()
	delete(s.sandboxes, sb.name)
	ans := map[string]any{"sandbox": sb.json()}
	s.mu.Unlock()
	if _, err := s.DeleteSandbox(r.Context(), sb.sb.ID); err != nil {
		apiError(w, http.StatusInternalServerError, "internal_error", "%v", err)
		return
	}
	fakecloud.WriteJSON(w, http.StatusOK, ans)
}

// withSession finds the session of the path; running says the route needs
// it running (410 sandbox_stopped otherwise, as the API answers).
func (s *Server) withSession(running bool, h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("sid")
		s.mu.Lock()
		se := s.sessions[id]
		gone := se != nil && s.sandboxes[se.sb.name] != se.sb
		status := ""
		if se != nil {
			status = se.status
		}
		s.mu.Unlock()
		if se == nil || gone {
			apiError(w, http.StatusNotFound, "not_found", "Session not found: %s", id)
			return
		}
		if running && status != "running" {
			apiError(w, http.StatusGone, "sandbox_stopped", "Sandbox is stopped")
			return
		}
		h(w, r, se)
	}
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request, se *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"session": se.json(), "routes": se.sb.routes()})
}

func (s *Server) stopSession(w http.ResponseWriter, r *http.Request, se *session) {
	s.stop(se, "stopped")
	s.mu.Lock()
	defer s.mu.Unlock()
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"session": se.json(), "sandbox": se.sb.json()})
}

func (s *Server) extend(w http.ResponseWriter, r *http.Request, se *session) {
	var body struct {
		Duration int64 `json:"duration"`
	}
	if err := fakecloud.DecodeJSON(r, &body); err != nil || body.Duration <= 0 {
		apiError(w, http.StatusBadRequest, "bad_request", "duration must be a positive number of milliseconds")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	se.timeout += body.Duration
	s.arm(se)
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"session": se.json()})
}

// createSnapshot copies the sandbox's files and stops the session, as
// Vercel's snapshot does.
func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request, se *session) {
	if r.ContentLength != 0 {
		var body struct {
			Expiration *int64 `json:"expiration"`
		}
		if err := fakecloud.DecodeJSON(r, &body); err != nil && !errors.Is(err, io.EOF) {
			apiError(w, http.StatusBadRequest, "bad_request", "%v", err)
			return
		}
	}
	s.stop(se, "stopped")
	dir, err := os.MkdirTemp("", "vercelfake-snap-")
	if err != nil {
		apiError(w, http.StatusInternalServerError, "internal_error", "%v", err)
		return
	}
	if err := copyDirs(se.sb.sb, dir); err != nil {
		_ = os.RemoveAll(dir)
		apiError(w, http.StatusInternalServerError, "internal_error", "snapshot: %v", err)
		return
	}
	var size int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			size += fi.Size()
		}
		return nil
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	sn := &snapshot{id: s.newID("snap"), sandbox: se.sb.name, session: se.id, dir: dir, size: size, status: "created",
		created: now, updated: now, runtime: se.sb.runtime}
	s.snapshots[sn.id] = sn
	se.snapshot, se.sb.snapshotID = now, sn.id
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"snapshot": s.snapshotJSON(sn), "session": se.json()})
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []map[string]any{}
	for _, sn := range s.snapshots {
		if name == "" || sn.sandbox == name {
			out = append(out, s.snapshotJSON(sn))
		}
	}
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"snapshots": out, "pagination": map[string]any{"count": len(out), "next": nil}})
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn := s.snapshots[r.PathValue("id")]
	if sn == nil {
		apiError(w, http.StatusNotFound, "not_found", "Snapshot not found: %s", r.PathValue("id"))
		return
	}
	fakecloud.WriteJSON(w, http.StatusOK, map[string]any{"snapshot": s.snapshotJSON(sn)})
}

func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	sn := s.snapshots[r.PathValue("id")]
	if sn == nil || sn.status == "deleted" {
		s.mu.Unlock()
		apiError(w, http.StatusNotFound, "not_found", "Snapshot not found: %s", r.PathValue("id"))
		return
	}
	sn.status, sn.updated = "deleted", time.Now()
	dir := sn.dir
	ans := map[string]any{"snapshot": s.snapshotJSON(sn)}
	s.mu.Unlock()
	_ = os.RemoveAll(dir)
	fakecloud.WriteJSON(w, http.StatusOK, ans)
}

// copyDirs copies the sandbox's Root and Home into dir/root, dir/home.
func copyDirs(sb *fakecloud.Sandbox, dir string) error {
	for _, p := range [][2]string{{sb.Root, "root"}, {sb.Home, "home"}} {
		if out, err := exec.Command("cp", "-a", p[0], filepath.Join(dir, p[1])).CombinedOutput(); err != nil {
			return errors.New(strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// restoreDir fills a new sandbox's Root and Home from a snapshot's copy.
func restoreDir(dir string, sb *fakecloud.Sandbox) error {
	for _, p := range [][2]string{{"root", sb.Root}, {"home", sb.Home}} {
		if out, err := exec.Command("cp", "-a", filepath.Join(dir, p[0])+"/.", p[1]).CombinedOutput(); err != nil {
			return errors.New(strings.TrimSpace(string(out)))
		}
	}
	return nil
}
