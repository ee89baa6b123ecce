package fakecloud

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNameTaken is CreateSandbox's error for a name another sandbox has.
var ErrNameTaken = errors.New("a sandbox with that name exists")

// Sandbox is one fake sandbox: a directory on the host and the processes
// started in it.
type Sandbox struct {
	// ID is the backend's opaque id.
	ID string
	// Name is the name given at create ("" for none).
	Name string
	// Labels are the labels given at create.
	Labels map[string]string
	// Dir is the sandbox's directory, the value of CORRAL_SANDBOX_ID in
	// its processes.
	Dir string
	// Root is the workspace directory (Dir/workspace).
	Root string
	// Home is HOME of its processes (Dir/home).
	Home string
	// Created is when it was made.
	Created time.Time

	s     *Server
	mu    sync.Mutex
	procs map[int]*Proc
	gone  bool
}

// CreateSandbox makes a sandbox. A name that another sandbox has is
// ErrNameTaken.
func (s *Server) CreateSandbox(name string, labels map[string]string) (*Sandbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if name != "" {
		for _, sb := range s.sandboxes {
			if sb.Name == name {
				return nil, ErrNameTaken
			}
		}
	}
	id := s.opts.IDPrefix + randomHex(8)
	dir := filepath.Join(s.opts.BaseDir, id)
	sb := &Sandbox{ID: id, Name: name, Labels: maps.Clone(labels), Dir: dir,
		Root: filepath.Join(dir, "workspace"), Home: filepath.Join(dir, "home"),
		Created: time.Now().UTC(), s: s, procs: map[int]*Proc{}}
	if sb.Labels == nil {
		sb.Labels = map[string]string{}
	}
	// No idle mark is set (os.Mkdir, not local.Create), so provider/local's
	// Destroy always scans for the marker.
	if err := os.MkdirAll(s.opts.BaseDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	for _, d := range []string{sb.Root, sb.Home} {
		if err := os.Mkdir(d, 0o755); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	s.sandboxes[id] = sb
	return sb, nil
}

// Sandbox returns the sandbox with id.
func (s *Server) Sandbox(id string) (*Sandbox, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb, ok := s.sandboxes[id]
	return sb, ok
}

// Sandboxes returns the sandboxes whose name is name (any when "") and
// whose labels include every pair of labels, oldest first.
func (s *Server) Sandboxes(name string, labels map[string]string) []*Sandbox {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Sandbox
	for _, sb := range s.sandboxes {
		if name != "" && sb.Name != name {
			continue
		}
		match := true
		for k, v := range labels {
			if sb.Labels[k] != v {
				match = false
				break
			}
		}
		if match {
			out = append(out, sb)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// DeleteSandbox kills every process of the sandbox (its groups, then
// whatever else carries its marker, through provider/local) and removes
// its directory. It reports false for a sandbox that does not exist.
func (s *Server) DeleteSandbox(ctx context.Context, id string) (bool, error) {
	s.mu.Lock()
	sb, ok := s.sandboxes[id]
	delete(s.sandboxes, id)
	s.mu.Unlock()
	if !ok {
		return false, nil
	}
	sb.mu.Lock()
	sb.gone = true
	procs := make([]*Proc, 0, len(sb.procs))
	for _, p := range sb.procs {
		procs = append(procs, p)
	}
	sb.mu.Unlock()
	for _, p := range procs {
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	}
	for _, p := range procs {
		select {
		case <-p.done:
		case <-ctx.Done():
		}
	}
	return true, s.local.Destroy(ctx, sb.Dir)
}

// Proc returns the process with pid started in the sandbox.
func (sb *Sandbox) Proc(pid int) (*Proc, bool) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	p, ok := sb.procs[pid]
	return p, ok
}

// Procs returns how many processes the sandbox has started that have not
// exited.
func (sb *Sandbox) Procs() int {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	n := 0
	for _, p := range sb.procs {
		if !p.Exited() {
			n++
		}
	}
	return n
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Alive reports whether pid is a live (not zombie) process on the host. A
// fake's sandboxes are host processes, so a test can check what a kill
// left behind.
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}
