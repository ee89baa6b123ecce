package sbx

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// Name is the provider's name.
const Name = "sbx"

// NamePrefix starts the name of every sandbox corral makes: the CLI has
// no labels, so the prefix and corral's record in the state directory are
// what mark corral's sandboxes.
const NamePrefix = "corral-"

// maxName bounds sandbox names (the CLI names a VM, a container and a
// git remote after it).
const maxName = 63

// waitDelay bounds how long a finished sbx's output pipes are drained.
const waitDelay = 5 * time.Second

// Options configure the provider. The zero value is usable.
type Options struct {
	// Binary is the sbx CLI: a path, or a name looked up on PATH.
	// Default "sbx".
	Binary string
	// Agent is the agent sandbox type given to `sbx create` (default
	// "shell": a plain sandbox; corral runs its own agents in it).
	Agent string
	// Template is the container image (`sbx create -t`); "" is the agent's.
	Template string
	// CPUs and Memory are `sbx create --cpus` and `--memory` ("" and 0:
	// sbx's defaults).
	CPUs   int
	Memory string
	// StateDir holds one host directory per sandbox: the workspace the
	// sandbox mounts (at the same path inside) and corral's record.
	// Default: the user cache directory's corral/sbx.
	StateDir string
	// AllowNetwork and DenyNetwork are per-sandbox network rules (hosts,
	// *.domains, host:port, "**"), added with `sbx policy allow|deny
	// network --sandbox` before the sandbox first starts.
	AllowNetwork []string
	DenyNetwork  []string
	// EgressDefaultDenied says the machine's default network policy is
	// deny-all (`sbx policy set-default deny-all`, no broad global
	// allows), so an egress allow-list added as the sandbox's allow rules
	// is its only way out. Without it an allow-list is refused (see
	// egress.go); corral cannot read the machine's default back.
	EgressDefaultDenied bool
	// Env is added to the environment of every sbx invocation (never the
	// commands' own variables, which go through an env file).
	Env []string
	// KillGrace is how long a kill waits after SIGTERM before SIGKILL.
	// Default 2s.
	KillGrace time.Duration
	// Logger receives reports of background failures. Default: discard.
	Logger *slog.Logger
}

// Provider is the Docker Sandboxes provider. Create it with New.
type Provider struct {
	opts  Options
	bin   string
	state string
	log   *slog.Logger
}

var _ sandbox.Provider = (*Provider)(nil)

// New returns the provider. It does not run sbx: a missing CLI is
// reported by the first call that needs it (FailedPrecondition naming it).
func New(opts Options) (*Provider, error) {
	if opts.Binary == "" {
		opts.Binary = "sbx"
	}
	if opts.Agent == "" {
		opts.Agent = "shell"
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = 2 * time.Second
	}
	for _, lists := range [][]string{opts.AllowNetwork, opts.DenyNetwork} {
		for _, r := range lists {
			if err := checkResource(r); err != nil {
				return nil, err
			}
		}
	}
	state := opts.StateDir
	if state == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		state = filepath.Join(dir, "corral", "sbx")
	}
	state, err := filepath.Abs(state)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.InvalidArgument, Name+".new", opts.StateDir, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{opts: opts, bin: opts.Binary, state: state, log: log}, nil
}

// checkResource refuses a network rule the CLI would split or misread:
// RESOURCES is one comma-separated argument.
func checkResource(r string) error {
	if r == "" || strings.ContainsAny(r, ", \t\r\n") || strings.HasPrefix(r, "-") {
		return sandbox.Errorf(sandbox.InvalidArgument, Name+".config", r,
			"a network rule is one host, *.domain, host:port or \"**\" (no commas, spaces or leading '-')")
	}
	return nil
}

// Name returns "sbx".
func (p *Provider) Name() string { return Name }

// Capabilities returns the provider's flags. KillableProcesses is measured
// by sandboxtest's KillMeasured against the fake (a group kill run as a
// second `sbx exec`); writableStdin is measured by SpawnStdin (`sbx exec
// -i` carries stdin and its EOF).
func (p *Provider) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{FS: true, Exec: true, Env: true, Ports: true, BackgroundProcesses: true,
		WritableStdin: true, KillableProcesses: true, NetworkPolicy: true, DurableFilesystem: true}
}

// SandboxName is the sbx name for a corral key: NamePrefix plus the key
// when it is made of the characters the CLI allows (letters, digits, '-',
// '.', '+') and fits; otherwise a readable part of it and a digest.
func SandboxName(key string) string {
	clean := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '+':
			return r
		}
		return '-'
	}, key)
	if clean == key && len(NamePrefix)+len(key) <= maxName && key != "" {
		return NamePrefix + key
	}
	sum := sha256.Sum256([]byte(key))
	digest := hex.EncodeToString(sum[:6])
	keep := maxName - len(NamePrefix) - len(digest) - 1
	clean = strings.Trim(clean, "-.")
	if len(clean) > keep {
		clean = clean[:keep]
	}
	if clean == "" {
		return NamePrefix + digest
	}
	return NamePrefix + clean + "-" + digest
}

// record is corral's own file about a sandbox, in its state directory.
type record struct {
	Name    string    `json:"name"`
	Key     string    `json:"key"`
	Created time.Time `json:"created"`
}

const recordName = "corral-sandbox.json"

func (p *Provider) dir(name string) string { return filepath.Join(p.state, name) }

func (p *Provider) readRecord(name string) (record, bool) {
	var r record
	b, err := os.ReadFile(filepath.Join(p.dir(name), recordName))
	if err != nil || json.Unmarshal(b, &r) != nil {
		return r, false
	}
	return r, true
}

// checkName refuses an id that is not a corral sandbox name (NamePrefix,
// the CLI's characters, at most 63 of them).
func checkName(op, id string) error {
	ok := strings.HasPrefix(id, NamePrefix) && len(id) <= maxName
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '+') {
			ok = false
		}
	}
	if !ok {
		return sandbox.Errorf(sandbox.InvalidArgument, op, id, "not a corral sbx sandbox name (%s…)", NamePrefix)
	}
	return nil
}

// Create makes a host workspace directory (with SourceDir's contents),
// runs `sbx create --name <name> --quiet … <agent> <workspace>` (the VM
// mounts it at the same path), and adds the network rules before the
// sandbox first starts. A failed create removes what it made.
func (p *Provider) Create(ctx context.Context, opts sandbox.CreateOptions) (sandbox.Handle, error) {
	const op = Name + ".create"
	key := opts.ID
	if key == "" {
		b := make([]byte, 8)
		_, _ = rand.Read(b)
		key = hex.EncodeToString(b)
	}
	name := SandboxName(key)
	rules, err := p.rules(op, name, opts.Network)
	if err != nil {
		return nil, err
	}
	egress, err := p.egressRule(opts.Egress)
	if err != nil {
		return nil, err
	}
	rules = append(egress, rules...)
	if err := os.MkdirAll(p.state, 0o755); err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, op, name, err)
	}
	dir := p.dir(name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if os.IsExist(err) {
			return nil, sandbox.Errorf(sandbox.AlreadyExists, op, name, "a sandbox directory for this key exists (%s): resume it or destroy it", dir)
		}
		return nil, sandbox.Wrap(sandbox.Internal, op, name, err)
	}
	ws := filepath.Join(dir, "workspace")
	fail := func(err error, rm bool) (sandbox.Handle, error) {
		if rm {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			_, _ = p.host(cctx, Name+".destroy", name, "rm", "--force", name)
			cancel()
		}
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := os.Mkdir(ws, 0o755); err != nil {
		return fail(sandbox.Wrap(sandbox.Internal, op, name, err), false)
	}
	rec, _ := json.Marshal(record{Name: name, Key: opts.ID, Created: time.Now().UTC()})
	if err := os.WriteFile(filepath.Join(dir, recordName), rec, 0o600); err != nil {
		return fail(sandbox.Wrap(sandbox.Internal, op, name, err), false)
	}
	if opts.SourceDir != "" {
		if err := copyTree(opts.SourceDir, ws); err != nil {
			return fail(sandbox.Wrap(sandbox.InvalidArgument, op, name, err), false)
		}
	}
	args := []string{"create", "--name", name, "--quiet"}
	if p.opts.CPUs > 0 {
		args = append(args, "--cpus", strconv.Itoa(p.opts.CPUs))
	}
	if p.opts.Memory != "" {
		args = append(args, "--memory", p.opts.Memory)
	}
	if p.opts.Template != "" {
		args = append(args, "--template", p.opts.Template)
	}
	args = append(args, p.opts.Agent, ws)
	sandbox.ReportProgress(ctx, sandbox.ProgressStep{Phase: "create", Subject: name, Where: "sbx", Status: "creating the Docker sandbox"})
	if _, err := p.host(ctx, op, name, args...); err != nil {
		// "already exists" is someone else's sandbox: never remove it.
		return fail(err, sandbox.CodeOf(err) != sandbox.AlreadyExists)
	}
	for _, r := range rules {
		if _, err := p.host(ctx, op, name, "policy", r[0], "network", "--sandbox", name, r[1]); err != nil {
			return fail(err, true)
		}
	}
	return p.newHandle(name, ws, opts.Env), nil
}

// rules returns the (decision, resources) pairs for a new sandbox.
func (p *Provider) rules(op, name string, mode sandbox.NetworkMode) ([][2]string, error) {
	var out [][2]string
	if mode == sandbox.NetworkDeny {
		if len(p.opts.AllowNetwork) > 0 {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, op, name,
				"network deny with provider.sbx.allowNetwork: sbx's deny rules win over allows, so the allow list would never apply")
		}
		out = append(out, [2]string{"deny", "**"})
	}
	if len(p.opts.AllowNetwork) > 0 {
		out = append(out, [2]string{"allow", strings.Join(p.opts.AllowNetwork, ",")})
	}
	if len(p.opts.DenyNetwork) > 0 {
		out = append(out, [2]string{"deny", strings.Join(p.opts.DenyNetwork, ",")})
	}
	return out, nil
}

// Resume finds the sandbox in `sbx ls --json`; a name that is not there
// is NotFound. A stopped sandbox starts on its next exec.
func (p *Provider) Resume(ctx context.Context, id string) (sandbox.Handle, error) {
	const op = Name + ".resume"
	if err := checkName(op, id); err != nil {
		return nil, err
	}
	e, ok, err := p.lookup(ctx, op, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, sandbox.Errorf(sandbox.NotFound, op, id, "no such Docker sandbox (sbx ls)")
	}
	ws := filepath.Join(p.dir(id), "workspace")
	if len(e.Workspaces) > 0 {
		ws = strings.TrimSuffix(e.Workspaces[0], ":ro")
	}
	return p.newHandle(id, ws, nil), nil
}

// RestoreSnapshot is unsupported: sbx has no snapshots.
func (p *Provider) RestoreSnapshot(context.Context, string, sandbox.CreateOptions) (sandbox.Handle, error) {
	return nil, sandbox.Unsupported(Name, "snapshots")
}

// DeleteSnapshot is unsupported: sbx has no snapshots.
func (p *Provider) DeleteSnapshot(context.Context, string) error {
	return sandbox.Unsupported(Name, "snapshots")
}

// Destroy runs `sbx rm --force <name>` (a sandbox already gone is fine)
// and removes corral's host directory for it (the workspace).
func (p *Provider) Destroy(ctx context.Context, id string) error {
	const op = Name + ".destroy"
	if err := checkName(op, id); err != nil {
		return err
	}
	if _, err := p.host(ctx, op, id, "rm", "--force", id); err != nil && sandbox.CodeOf(err) != sandbox.NotFound {
		return err
	}
	if _, ok := p.readRecord(id); ok {
		if err := os.RemoveAll(p.dir(id)); err != nil {
			return sandbox.Wrap(sandbox.Internal, op, id, err)
		}
	}
	return nil
}

// copyTree copies the regular files and directories of src into dst,
// keeping modes; a link is refused.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
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
			return os.Mkdir(target, info.Mode().Perm()|0o700)
		case d.Type().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(target, b, info.Mode().Perm())
		}
		return fmt.Errorf("SourceDir holds %s, which is not a regular file or directory; the sbx provider copies those only", rel)
	})
}

// lookPath reports whether the CLI can be found (for the registry's ping).
func (p *Provider) lookPath() error {
	if _, err := exec.LookPath(p.bin); err != nil {
		return sandbox.Errorf(sandbox.FailedPrecondition, Name+".ping", "",
			"the Docker Sandboxes CLI %q is not on PATH: install sbx (docs.docker.com/ai/sandboxes), run `sbx login`, or set provider.sbx.binary", p.bin)
	}
	return nil
}
