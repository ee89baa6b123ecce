package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// Name is the provider's name.
const Name = "local"

// SandboxIDEnv is the environment variable every command run in a local
// sandbox carries; its value is the sandbox id.
const SandboxIDEnv = "CORRAL_SANDBOX_ID"

// Options configure the local provider. The zero value is usable.
type Options struct {
	// BaseDir holds the directories of new sandboxes. Default:
	// os.TempDir()/corral-sandboxes.
	BaseDir string
	// Dir, when set, is a fixed directory used as every new sandbox's root
	// instead of a fresh one. It must exist.
	Dir string
	// RemoveDir makes Destroy remove a fixed Dir too. Fresh directories
	// under BaseDir are always removed.
	RemoveDir bool
	// ScrubEnv names host environment variables that commands must not
	// inherit (for example API keys that would override a CLI's own login).
	ScrubEnv []string
	// KillGrace is how long Kill waits after SIGTERM before SIGKILL.
	// Default 2s.
	KillGrace time.Duration
	// Logger receives reports of teardown problems. Default: discard.
	Logger *slog.Logger
	// ScriptShell is the BusyBox that runs corral's per-run scripts (the
	// journal wrapper) in place of sh: ScriptShellAuto ("", the default)
	// takes "busybox" from the PATH, ScriptShellOff none, anything else
	// is a path. It is used only when it is statically linked and its sh
	// prefers its applets (Debian's busybox-static is); otherwise the
	// scripts run under sh. The agent itself always runs the host's
	// programs: the wrapper is given the agent's program by absolute path.
	ScriptShell string
	// FavorDynMods remounts the host's cgroup v2 hierarchy with the
	// favordynmods option at New, where it lacks it (see cgroup.go):
	// without it, a cgroup migration waits an RCU grace period (13–20 ms
	// measured) whenever no migration happened in the last few tens of
	// milliseconds. A run's wrapper is started in the run's cgroup and
	// makes none unless its agent left processes behind or it is
	// cancelled (or the kernel is older than 5.7). Host-wide and root
	// only; a failure is logged, never fatal. Without the option New logs
	// a hint (at Info) once per process instead.
	FavorDynMods bool
}

// Provider is the local provider. Create it with New.
type Provider struct {
	opts    Options
	baseDir string
	log     *slog.Logger
	shell   string // the qualifying BusyBox of Options.ScriptShell, or ""

	mu     sync.Mutex
	states map[string]*state // by sandbox id; shared by every handle of one sandbox
}

var _ sandbox.Provider = (*Provider)(nil)

// New returns a local provider. It fails with InvalidArgument when
// Options.Dir is set but is not an existing directory.
func New(opts Options) (*Provider, error) {
	if opts.KillGrace <= 0 {
		opts.KillGrace = 2 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base := opts.BaseDir
	if base == "" {
		base = filepath.Join(os.TempDir(), "corral-sandboxes")
	}
	base, err := filepath.Abs(base)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.InvalidArgument, "local.new", opts.BaseDir, err)
	}
	if opts.Dir != "" {
		dir, err := filepath.Abs(opts.Dir)
		if err != nil {
			return nil, sandbox.Wrap(sandbox.InvalidArgument, "local.new", opts.Dir, err)
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, "local.new", opts.Dir, "not an existing directory")
		}
		opts.Dir = dir
	}
	checkCgroup(opts.FavorDynMods, opts.Logger)
	return &Provider{opts: opts, baseDir: base, log: log, shell: scriptShell(opts.ScriptShell), states: map[string]*state{}}, nil
}

// Name returns "local".
func (p *Provider) Name() string { return Name }

// Capabilities returns the local provider's flags. KillableProcesses is
// backed by the conformance suite's measured kill case.
func (p *Provider) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{
		FS: true, Exec: true, Env: true, Ports: true, BackgroundProcesses: true,
		WritableStdin: true, KillableProcesses: true, DurableFilesystem: true, Fork: true,
	}
}

// Create makes a sandbox directory (or adopts Options.Dir). When opts.ID is
// set the directory is BaseDir/<ID>, which must not exist yet; ID must then
// be a plain file name. opts.SourceDir is copied into the new directory.
// Network gates are not enforced (NetworkPolicy is false).
func (p *Provider) Create(ctx context.Context, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, sandbox.Wrap(sandbox.Canceled, "local.create", opts.ID, err)
	}
	for k := range opts.Env {
		if err := sandbox.ValidateEnvName(k); err != nil {
			return nil, err
		}
	}
	var dir string
	owned := true
	switch {
	case p.opts.Dir != "":
		dir, owned = p.opts.Dir, p.opts.RemoveDir
	case opts.ID != "":
		if opts.ID == "." || opts.ID == ".." || strings.ContainsAny(opts.ID, "/\\\x00") {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, "local.create", opts.ID, "id must be a plain directory name")
		}
		dir = filepath.Join(p.baseDir, opts.ID)
	default:
		dir = filepath.Join(p.baseDir, "sb-"+randomHex(8))
	}
	if owned && dir != p.opts.Dir {
		if err := os.MkdirAll(p.baseDir, 0o755); err != nil {
			return nil, sandbox.Wrap(sandbox.Internal, "local.create", dir, err)
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			if errors.Is(err, os.ErrExist) {
				return nil, sandbox.Errorf(sandbox.AlreadyExists, "local.create", dir, "sandbox directory exists; resume it instead")
			}
			return nil, sandbox.Wrap(sandbox.Internal, "local.create", dir, err)
		}
		markIdle(dir) // nothing can have run in a directory made just now
	}
	if opts.SourceDir != "" {
		if err := copyTree(ctx, opts.SourceDir, dir); err != nil {
			if owned {
				_ = os.RemoveAll(dir)
			}
			return nil, sandbox.Wrap(sandbox.Internal, "local.create", dir, err)
		}
	}
	h, err := p.open(dir, owned)
	if err != nil {
		if owned {
			_ = os.RemoveAll(dir)
		}
		return nil, err
	}
	h.st.setEnv(opts.Env)
	return h, nil
}

// Resume reopens the sandbox whose id (directory) is given. A missing
// directory is NotFound.
func (p *Provider) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, sandbox.Wrap(sandbox.Canceled, "local.resume", id, err)
	}
	dir, err := p.checkID("local.resume", id)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(dir)
	if err != nil || !fi.IsDir() {
		return nil, sandbox.Errorf(sandbox.NotFound, "local.resume", id, "sandbox is gone")
	}
	return p.open(dir, p.owns(dir))
}

// RestoreSnapshot is unsupported: the local provider has no snapshots.
func (p *Provider) RestoreSnapshot(context.Context, string, sandbox.CreateOptions) (sandbox.Handle, error) {
	return nil, sandbox.Unsupported(Name, "snapshots")
}

// DeleteSnapshot is unsupported: the local provider has no snapshots.
func (p *Provider) DeleteSnapshot(context.Context, string) error {
	return sandbox.Unsupported(Name, "snapshots")
}

// Destroy kills every process of the sandbox and removes its directory when
// corral created it. A sandbox that is already gone is fine.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	dir, err := p.checkID("local.destroy", id)
	if err != nil {
		return err
	}
	return p.destroy(ctx, dir, p.owns(dir))
}

func (p *Provider) checkID(op, id string) (string, error) {
	if id == "" || !filepath.IsAbs(id) {
		return "", sandbox.Errorf(sandbox.InvalidArgument, op, id, "a local sandbox id is an absolute directory path")
	}
	return filepath.Clean(id), nil
}

// owns reports whether corral created dir (so Destroy may remove it).
func (p *Provider) owns(dir string) bool {
	if p.opts.Dir != "" && dir == p.opts.Dir {
		return p.opts.RemoveDir
	}
	return filepath.Dir(dir) == p.baseDir
}

func (p *Provider) open(dir string, owned bool) (*handle, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.NotFound, "local.open", dir, err)
	}
	p.mu.Lock()
	st := p.states[dir]
	if st == nil {
		st = &state{env: map[string]string{}, procs: map[*proc]struct{}{}}
		p.states[dir] = st
	}
	p.mu.Unlock()
	return &handle{p: p, id: dir, root: root, owned: owned, st: st}, nil
}

func (p *Provider) destroy(ctx context.Context, dir string, owned bool) error {
	p.mu.Lock()
	st := p.states[dir]
	delete(p.states, dir)
	p.mu.Unlock()
	if st != nil {
		st.killAll(ctx, p)
	}
	// The idle mark proves that no corral process ever started a command
	// here, so no process can carry the marker; otherwise scan, since a
	// command may have left its process group (setsid) or an earlier
	// corral process may have started it.
	if !isIdle(dir) {
		killByMarker(ctx, dir, p.opts.KillGrace, p.log)
	}
	if !owned {
		return nil
	}
	var err error
	for attempt := 1; attempt <= 10; attempt++ {
		if err = os.RemoveAll(dir); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			attempt = 10
		case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
		}
	}
	p.log.Warn("local: could not remove sandbox directory", "dir", dir, "err", err)
	return sandbox.Wrap(sandbox.Internal, "local.destroy", dir, err)
}

// state is what every handle of one sandbox shares: the environment overlay
// and the processes started in it.
type state struct {
	mu    sync.Mutex
	env   map[string]string
	procs map[*proc]struct{}
	ran   bool // this process has removed the directory's idle mark
}

// markRan removes the directory's idle mark before the first command this
// process starts in it, so that Destroy (in any process) scans for it.
func (s *state) markRan(dir string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ran {
		return nil
	}
	if err := markRan(dir); err != nil {
		return err
	}
	s.ran = true
	return nil
}

func (s *state) setEnv(vars map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range vars {
		s.env[k] = v
	}
}

func (s *state) track(pr *proc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A finished command whose group is empty (kill(-pgid, 0) says ESRCH)
	// is forgotten. One whose group still holds zombies (an init that reaps
	// late) costs a /proc scan to judge, so those are judged only once
	// many have piled up.
	for old := range s.procs {
		if old.finished() && !groupMember(old.pgid) {
			delete(s.procs, old)
		}
	}
	if len(s.procs) >= trackScanAt {
		for old := range s.procs {
			if old.finished() && !groupAlive(old.pgid) {
				delete(s.procs, old)
			}
		}
	}
	s.procs[pr] = struct{}{}
}

// trackScanAt is how many tracked commands make track scan /proc for the
// finished ones whose groups hold only zombies.
const trackScanAt = 64

func (s *state) killAll(ctx context.Context, p *Provider) {
	s.mu.Lock()
	procs := make([]*proc, 0, len(s.procs))
	for pr := range s.procs {
		procs = append(procs, pr)
	}
	s.procs = map[*proc]struct{}{}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, pr := range procs {
		wg.Go(func() {
			if err := pr.Kill(ctx, 0); err != nil {
				p.log.Warn("local: kill on destroy failed", "pgid", pr.pgid, "err", err)
			}
		})
	}
	wg.Wait()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// copyTree copies the directory tree src into dst (which exists), keeping
// modes and symbolic links.
func copyTree(ctx context.Context, src, dst string) error {
	return filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil || rel == "." {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		case d.Type()&os.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			return copyFile(path, target, info.Mode().Perm())
		}
		return nil // sockets, devices and pipes are not copied
	})
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
