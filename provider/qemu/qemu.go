// Package qemu is a sandbox.Provider whose sandboxes are microVMs under
// QEMU: one QEMU process per sandbox, KVM when the host's /dev/kvm can run
// a stock guest (hardware VT-x/AMD-V) and software emulation (TCG)
// otherwise, with snapshots that hold the VM's memory, so processes keep
// running across a snapshot and restore, and a fork is a second restore.
//
// The guest boots Debian's cloud kernel (unpacked by scripts/setup-qemu.sh)
// with an initramfs whose /init is corral's guest agent (cmd/corral-guest):
// it loads the virtio modules, mounts the root disk and the workspace disk,
// and serves commands over virtio-serial ports bound to unix sockets on
// the host (protocol: provider/qemu/guestproto; two ports, so a second
// corral process can take a VM over while the first holds the other). Commands run as leaders of
// their own process group in the guest, and Kill signals the group from
// the agent, so KillableProcesses is native; files go through
// sandbox/execfs.
//
// Disks: the root file system is a cached ext4 image made from a local
// Docker image (docker export, cached by image id), a host directory, or
// by default the host's static BusyBox; the workspace (/workspace) is a
// cached empty ext4 image. Each sandbox gets its own qcow2 overlay of both.
//
// State lives in <Cache>/vms/<id> (vm.json, the overlays, qemu.pid,
// console.log); QEMU is daemonized, so a VM outlives the corral process that
// made it and Resume finds it by id. Snapshots live in
// <Cache>/snapshots/<id>: QEMU's migration stream of the paused VM
// (migrate to a file) plus copies of the overlays.
package qemu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// Name is the provider's name.
const Name = "qemu"

// Defaults.
const (
	DefaultCPUs        = 1
	DefaultMemoryMB    = 256
	DefaultWorkspaceMB = 1024
	DefaultCache       = "/var/cache/corral-qemu"
)

// Options configure a Provider. Every field is optional.
type Options struct {
	// Cache is where kernels, images, VM state and snapshots live.
	// Default $CORRAL_QEMU_CACHE, else /var/cache/corral-qemu.
	Cache string
	// Kernel is an unpacked kernel directory (vmlinuz, modules/). Default:
	// the one scripts/setup-qemu.sh named in <Cache>/current.
	Kernel string
	// Agent is the static guest agent binary (cmd/corral-guest). Default
	// $CORRAL_QEMU_AGENT, corral-guest on PATH, or next to the executable.
	Agent string
	// Image is a local Docker image whose file system becomes the root.
	Image string
	// RootDir is a host directory that becomes the root (when Image is
	// empty). With neither, the root is the host's static BusyBox.
	RootDir string
	// Accel is "kvm", "tcg" or "" (auto: KVM when usable, else TCG).
	Accel string
	// Machine is QEMU's machine type: q35 (default) or pc. The devices are
	// virtio-pci, so microvm (virtio-mmio) is not offered yet.
	Machine string
	// CPUs and MemoryMB size each VM. Defaults 1 and 256.
	CPUs     int
	MemoryMB int
	// WorkspaceMB is the workspace disk's size. Default 1024 (sparse).
	WorkspaceMB int
	// QEMU is the qemu-system-x86_64 binary. Default from PATH.
	QEMU string
	// BootTimeout bounds a boot or restore until the agent answers.
	// Default 2 minutes (TCG on a loaded machine is slow).
	BootTimeout time.Duration
	// ColdBoot makes every Create boot the kernel. By default Create
	// restores a boot template instead: a memory snapshot of a freshly
	// booted idle VM of the same configuration, made once and cached (the
	// guest reseeds its random pool and takes its host name and clock from
	// the host when it wakes).
	ColdBoot bool
	// KillGrace is the SIGTERM to SIGKILL grace of a kill. Default 2s.
	KillGrace time.Duration
	// Logger receives the provider's reports. Default: discard.
	Logger *slog.Logger
}

// Provider makes microVM sandboxes. It is safe for concurrent use.
type Provider struct {
	opts  Options
	cache string
	qemu  string
	accel string
	kdir  string
	log   *slog.Logger

	tmplMu   sync.Mutex
	rootMu   sync.Mutex
	rootPath string
	initOnce sync.Once
	initrd   string
	initErr  error
}

var _ sandbox.Provider = (*Provider)(nil)

// capabilities are the flags the conformance suite proves.
func capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{FS: true, Exec: true, Env: true, BackgroundProcesses: true, WritableStdin: true,
		KillableProcesses: true, Snapshots: true, NetworkPolicy: true, Fork: true, OwnProcessTable: true, Ports: true,
		DurableFilesystem: true}
}

// New returns a Provider. It checks that QEMU and the kernel are there;
// images and the initramfs are made at the first Create.
func New(opts Options) (*Provider, error) {
	if opts.Cache == "" {
		opts.Cache = os.Getenv("CORRAL_QEMU_CACHE")
	}
	if opts.Cache == "" {
		opts.Cache = DefaultCache
	}
	if opts.CPUs <= 0 {
		opts.CPUs = DefaultCPUs
	}
	if opts.MemoryMB <= 0 {
		opts.MemoryMB = DefaultMemoryMB
	}
	if opts.WorkspaceMB <= 0 {
		opts.WorkspaceMB = DefaultWorkspaceMB
	}
	switch opts.Machine {
	case "":
		opts.Machine = "q35"
	case "q35", "pc":
	default:
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "qemu.new", opts.Machine, "machine must be q35 or pc")
	}
	if opts.BootTimeout <= 0 {
		opts.BootTimeout = 2 * time.Minute
	}
	p := &Provider{opts: opts, cache: opts.Cache, log: opts.Logger}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	q := opts.QEMU
	if q == "" {
		q = "qemu-system-x86_64"
	}
	path, err := exec.LookPath(q)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.FailedPrecondition, "qemu.new", q, fmt.Errorf("QEMU not found (run scripts/setup-qemu.sh): %w", err))
	}
	p.qemu = path
	switch opts.Accel {
	case "kvm", "tcg":
		p.accel = opts.Accel
	case "":
		p.accel = "tcg"
		if kvmUsable() {
			p.accel = "kvm"
		}
	default:
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "qemu.new", opts.Accel, "accel must be kvm, tcg or empty")
	}
	if p.kdir, err = kernelDir(opts.Kernel, p.cache); err != nil {
		return nil, sandbox.Wrap(sandbox.FailedPrecondition, "qemu.new", "kernel", err)
	}
	if _, err := os.Stat(filepath.Join(p.kdir, "vmlinuz")); err != nil {
		return nil, sandbox.Wrap(sandbox.FailedPrecondition, "qemu.new", "kernel", err)
	}
	return p, nil
}

// Name returns "qemu".
func (p *Provider) Name() string { return Name }

// Capabilities returns the provider's capabilities.
func (p *Provider) Capabilities() sandbox.Capabilities { return capabilities() }

// Accel returns the accelerator the provider's VMs use: "kvm" or "tcg".
func (p *Provider) Accel() string { return p.accel }

func (p *Provider) prepare(ctx context.Context) error {
	p.initOnce.Do(func() {
		agent, err := findAgent(p.opts.Agent)
		if err != nil {
			p.initErr = sandbox.Wrap(sandbox.FailedPrecondition, "qemu.create", "agent", err)
			return
		}
		if p.initrd, err = buildInitrd(p.cache, p.kdir, agent); err != nil {
			p.initErr = sandbox.Wrap(sandbox.Internal, "qemu.create", "initrd", err)
		}
	})
	return p.initErr
}

var idRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// vmID is the sandbox id for a requested id: the id itself when it is a
// safe directory name, else a digest of it.
func vmID(req string) string {
	if req == "" {
		return "vm-" + randHex(8)
	}
	if idRe.MatchString(req) {
		return req
	}
	return "vm-" + digest(req)
}

// Create boots a new VM and waits for its agent. An existing sandbox with
// the requested id is AlreadyExists.
func (p *Provider) Create(ctx context.Context, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	const op = "qemu.create"
	for k := range opts.Env {
		if err := sandbox.ValidateEnvName(k); err != nil {
			return nil, err
		}
	}
	if err := p.prepare(ctx); err != nil {
		return nil, err
	}
	root, err := p.rootImage(ctx)
	if err != nil {
		return nil, err
	}
	wsBase, err := p.workspaceBase(ctx)
	if err != nil {
		return nil, err
	}
	id := vmID(opts.ID)
	v := p.vmFor(id)
	if err := os.MkdirAll(filepath.Dir(v.dir), 0o755); err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, op, id, err)
	}
	if err := os.Mkdir(v.dir, 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, sandbox.Errorf(sandbox.AlreadyExists, op, id, "a sandbox with this id exists")
		}
		return nil, sandbox.Wrap(sandbox.Internal, op, id, err)
	}
	c := &vmConfig{ID: id, Accel: p.accel, Machine: p.opts.Machine, CPUs: p.opts.CPUs, MemoryMB: p.opts.MemoryMB,
		Kernel: filepath.Join(p.kdir, "vmlinuz"), Initrd: p.initrd, Network: opts.Network != sandbox.NetworkDeny,
		Labels: opts.Labels, CreatedAt: time.Now().UTC()}
	if c.Accel == "tcg" {
		c.TSCkHz = tscKHz()
	}
	var h *handle
	if !p.opts.ColdBoot {
		if t, terr := p.template(ctx, c, root, wsBase); terr == nil {
			_ = os.Remove(v.dir) // restore makes it again
			h, err = p.restore(ctx, op, t, opts)
			if err != nil {
				return nil, err
			}
		} else {
			p.log.Warn("qemu: no boot template, booting cold", "err", terr)
		}
	}
	if h == nil {
		if h, err = p.coldBoot(ctx, op, v, c, root, wsBase); err != nil {
			return nil, err
		}
	}
	_ = h.Env().Set(opts.Env)
	if opts.SourceDir != "" {
		if err := sandbox.UploadDir(ctx, h.FS(), opts.SourceDir, Name); err != nil {
			_ = p.Destroy(context.WithoutCancel(ctx), id)
			return nil, err
		}
	}
	return h, nil
}

// coldBoot boots c from fresh overlays of the root and workspace images.
func (p *Provider) coldBoot(ctx context.Context, op string, v vm, c *vmConfig, root, wsBase string) (*handle, error) {
	return p.boot(ctx, op, v, c, func(ctx context.Context) error {
		if err := qemuImg(ctx, "create", "-q", "-f", "qcow2", "-F", "raw", "-b", root, filepath.Join(v.dir, "root.qcow2")); err != nil {
			return err
		}
		return qemuImg(ctx, "create", "-q", "-f", "qcow2", "-F", "raw", "-b", wsBase, filepath.Join(v.dir, "ws.qcow2"))
	}, "")
}

// boot prepares the disks with disks, starts QEMU (restoring from the
// memory file mem when set) and waits for the agent. On failure the VM is
// removed.
func (p *Provider) boot(ctx context.Context, op string, v vm, c *vmConfig, disks func(context.Context) error, mem string) (*handle, error) {
	fail := func(code sandbox.Code, err error) (*handle, error) {
		_ = p.Destroy(context.WithoutCancel(ctx), c.ID)
		return nil, sandbox.Wrap(code, op, c.ID, err)
	}
	if err := disks(ctx); err != nil {
		return fail(sandbox.Internal, err)
	}
	if err := writeConfig(v.configPath(), c); err != nil {
		return fail(sandbox.Internal, err)
	}
	t0 := time.Now()
	if err := p.launch(ctx, v, c, mem != ""); err != nil {
		return fail(sandbox.Unavailable, err)
	}
	bctx, cancel := context.WithTimeout(ctx, p.opts.BootTimeout)
	defer cancel()
	if mem != "" {
		q, err := dialQMP(bctx, v.qmp)
		if err != nil {
			return fail(sandbox.Unavailable, err)
		}
		_, err = q.do(bctx, "migrate-incoming", map[string]any{"uri": "exec:cat " + shellQuote(mem)})
		if err == nil {
			err = q.waitRunning(bctx)
		}
		q.close()
		if err != nil {
			return fail(sandbox.Unavailable, fmt.Errorf("restoring memory: %w", err))
		}
	}
	a := agentFor(v, c.ID)
	if err := a.ensure(bctx); err != nil {
		return fail(sandbox.Unavailable, fmt.Errorf("waiting for the guest agent (console: %s): %w", filepath.Join(v.dir, "console.log"), err))
	}
	p.log.Info("qemu: VM up", "id", c.ID, "accel", c.Accel, "restored", mem != "", "elapsed", time.Since(t0))
	return p.newHandle(v, c), nil
}

// Resume reconnects to a VM by id. A VM whose QEMU ended is booted again
// from its disks (processes are gone, files are kept). A VM that does not
// exist is NotFound. The environment is not persisted: re-apply it with
// SetEnv.
func (p *Provider) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	const op = "qemu.resume"
	if id == "" {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, op, id, "empty sandbox id")
	}
	id = vmID(id)
	v := p.vmFor(id)
	c, err := readConfig(v.configPath())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, sandbox.Errorf(sandbox.NotFound, op, id, "no such sandbox")
		}
		return nil, sandbox.Wrap(sandbox.Internal, op, id, err)
	}
	if v.pid() == 0 {
		dropAgent(v)
		p.log.Info("qemu: VM not running, booting it from its disks", "id", id)
		if err := p.launch(ctx, v, c, false); err != nil {
			return nil, sandbox.Wrap(sandbox.Unavailable, op, id, err)
		}
	}
	bctx, cancel := context.WithTimeout(ctx, p.opts.BootTimeout)
	defer cancel()
	if err := agentFor(v, id).ensure(bctx); err != nil {
		return nil, sandbox.Wrap(sandbox.Unavailable, op, id, err)
	}
	return p.newHandle(v, c), nil
}

// Destroy ends the VM's QEMU and removes its disks and state. A VM that
// is gone, or whose QEMU died, is fine.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	if id == "" {
		return sandbox.Errorf(sandbox.InvalidArgument, "qemu.destroy", id, "empty sandbox id")
	}
	id = vmID(id)
	v := p.vmFor(id)
	dropAgent(v)
	v.stop(ctx)
	_ = os.RemoveAll(v.sockDir())
	if err := os.RemoveAll(v.dir); err != nil {
		return sandbox.Wrap(sandbox.Internal, "qemu.destroy", id, err)
	}
	return nil
}

// shellQuote quotes s for the sh that QEMU's exec: migration runs.
func shellQuote(s string) string { return sandbox.ShellQuote(s) }
