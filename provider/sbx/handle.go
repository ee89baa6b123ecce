package sbx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execfs"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// handle is one Docker sandbox, reached through `sbx exec`.
type handle struct {
	p    *Provider
	name string
	root string
	fs   sandbox.FS
	run  *execproc.Runner
	env  *execproc.Env // create env and SetEnv's overlay: this process's memory only

	mu    sync.Mutex
	ports map[int]string
}

var _ sandbox.Handle = (*handle)(nil)

func (p *Provider) newHandle(name, root string, env map[string]string) *handle {
	h := &handle{p: p, name: name, root: root, env: execproc.NewEnv(env), ports: map[int]string{}}
	h.run = execproc.New(backend{h}, execproc.Options{Provider: Name, ID: name, Root: root,
		Env: h.env.Copy, KillGrace: p.opts.KillGrace, Logger: p.log})
	h.fs = execfs.New(func(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
		return h.run.Run(ctx, Name+".fs", cmd.Argv(), cmd.Stdin, "")
	}, execfs.Options{Root: root, Provider: Name})
	return h
}

// ID returns the sandbox's name.
func (h *handle) ID() string { return h.name }

// Provider returns "sbx".
func (h *handle) Provider() string { return Name }

// WorkspaceRoot returns the workspace's path: the host directory the
// sandbox mounts at the same path.
func (h *handle) WorkspaceRoot() string { return h.root }

// Capabilities returns the provider's capabilities.
func (h *handle) Capabilities() sandbox.Capabilities { return h.p.Capabilities() }

// FS returns the exec-backed file system (the path guard runs inside).
func (h *handle) FS() sandbox.FS { return h.fs }

// Exec runs cmd to completion.
func (h *handle) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	res, err := h.run.Exec(ctx, cmd)
	return res, h.gone(ctx, err)
}

// Spawn starts cmd.
func (h *handle) Spawn(ctx context.Context, cmd sandbox.Command) (sandbox.Process, error) {
	pr, err := h.run.Spawn(ctx, cmd)
	return pr, h.gone(ctx, err)
}

// gone turns a command whose wrapper never started into NotFound when the
// sandbox is no longer listed (sbx exec's own failure looks like a
// command's exit otherwise).
func (h *handle) gone(ctx context.Context, err error) error {
	if sandbox.CodeOf(err) != sandbox.FailedPrecondition {
		return err
	}
	if _, ok, lerr := h.p.lookup(ctx, Name+".exec", h.name); lerr == nil && !ok {
		return sandbox.Errorf(sandbox.NotFound, Name+".exec", h.name, "the Docker sandbox is gone (sbx ls)")
	}
	return err
}

// ConnectPort publishes the port on loopback when it is not yet
// (`sbx ports <name> --publish <port>`) and returns the host address
// `sbx ports <name> --json` reports.
func (h *handle) ConnectPort(ctx context.Context, port int) (sandbox.Endpoint, error) {
	const op = Name + ".port"
	h.mu.Lock()
	url, ok := h.ports[port]
	h.mu.Unlock()
	if ok {
		return sandbox.Endpoint{URL: url}, nil
	}
	url, err := h.published(ctx, op, port)
	if err != nil {
		return sandbox.Endpoint{}, err
	}
	if url == "" {
		if _, err := h.p.host(ctx, op, h.name, "ports", h.name, "--publish", strconv.Itoa(port)); err != nil {
			return sandbox.Endpoint{}, err
		}
		if url, err = h.published(ctx, op, port); err != nil {
			return sandbox.Endpoint{}, err
		}
		if url == "" {
			return sandbox.Endpoint{}, sandbox.Errorf(sandbox.Unavailable, op, h.name, "sbx published port %d but does not list it", port)
		}
	}
	h.mu.Lock()
	h.ports[port] = url
	h.mu.Unlock()
	return sandbox.Endpoint{URL: url}, nil
}

// portEntry is one published port in `sbx ports --json` (the field
// spellings the CLI has used).
type portEntry struct {
	SandboxPort int    `json:"sandbox_port"`
	Port        int    `json:"port"`
	HostPort    int    `json:"host_port"`
	HostPortC   int    `json:"hostPort"`
	HostIP      string `json:"host_ip"`
}

// published returns the URL of port when it is published, or "".
func (h *handle) published(ctx context.Context, op string, port int) (string, error) {
	res, err := h.p.host(ctx, op, h.name, "ports", h.name, "--json")
	if err != nil {
		return "", err
	}
	var list []portEntry
	if err := decodeJSON(res.stdout, &list); err != nil {
		var m map[string]int // {"<sandbox port>": host port}
		if merr := decodeJSON(res.stdout, &m); merr != nil {
			return "", sandbox.Errorf(sandbox.Internal, op, h.name, "sbx ports --json printed what is not its JSON: %v", err)
		}
		if hp := m[strconv.Itoa(port)]; hp > 0 {
			return "http://localhost:" + strconv.Itoa(hp), nil
		}
		return "", nil
	}
	for _, e := range list {
		sp, hp := max(e.SandboxPort, e.Port), max(e.HostPort, e.HostPortC)
		if sp == port && hp > 0 {
			ip := e.HostIP
			if ip == "" || ip == "127.0.0.1" || ip == "::1" || ip == "0.0.0.0" {
				ip = "localhost"
			}
			return "http://" + ip + ":" + strconv.Itoa(hp), nil
		}
	}
	return "", nil
}

// SetEnv merges vars into every later command's environment; the values
// live only in this handle and reach commands through an env file on a
// pipe, never argv.
func (h *handle) SetEnv(_ context.Context, vars map[string]string) error { return h.env.Set(vars) }

// Snapshot is unsupported: sbx has no snapshots.
func (h *handle) Snapshot(context.Context, string) (sandbox.Snapshot, error) {
	return sandbox.Snapshot{}, sandbox.Unsupported(Name, "snapshots")
}

// Fork is unsupported.
func (h *handle) Fork(context.Context) (sandbox.Handle, error) {
	return nil, sandbox.Unsupported(Name, "fork")
}

// Destroy removes the sandbox.
func (h *handle) Destroy(ctx context.Context) error { return h.p.Destroy(ctx, h.name) }

// backend is execproc's Backend over `sbx exec`.
type backend struct{ h *handle }

// envFD is the descriptor the env file is read from in the sbx child: a
// pipe, so the values are never in argv or on disk.
const envFD = "/dev/fd/3"

// Start runs `sbx exec [-i] [-u user] -w <dir> [--env-file /dev/fd/3]
// <name> <argv…>`: every flag before the name (after it they would be the
// command's).
func (b backend) Start(ctx context.Context, op string, spec execproc.Spec) (execproc.Stream, error) {
	h := b.h
	args := []string{"exec"}
	if spec.Stdin {
		args = append(args, "-i")
	}
	if spec.User != "" {
		args = append(args, "-u", spec.User)
	}
	if spec.Dir != "" {
		args = append(args, "-w", spec.Dir)
	}
	var envFile strings.Builder
	for _, kv := range spec.Env {
		if strings.ContainsAny(kv, "\n\r") {
			k, _, _ := strings.Cut(kv, "=")
			return nil, sandbox.Errorf(sandbox.InvalidArgument, op, h.name,
				"the value of %s holds a line break, which an sbx env file cannot carry", k)
		}
		envFile.WriteString(kv)
		envFile.WriteByte('\n')
	}
	if len(spec.Env) > 0 {
		args = append(args, "--env-file", envFD)
	}
	args = append(args, h.name)
	args = append(args, spec.Argv...)

	c := exec.Command(h.p.bin, args...)
	c.Env = append(os.Environ(), h.p.opts.Env...)
	s := &stream{c: c, done: make(chan struct{})}
	var err error
	var outW, errW, inR, envR, envW *os.File
	closeAll := func(fs ...*os.File) {
		for _, f := range fs {
			if f != nil {
				_ = f.Close()
			}
		}
	}
	if s.out, outW, err = os.Pipe(); err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, op, h.name, err)
	}
	if s.err, errW, err = os.Pipe(); err != nil {
		closeAll(s.out, outW)
		return nil, sandbox.Wrap(sandbox.Internal, op, h.name, err)
	}
	if spec.Stdin {
		if inR, s.in, err = os.Pipe(); err != nil {
			closeAll(s.out, outW, s.err, errW)
			return nil, sandbox.Wrap(sandbox.Internal, op, h.name, err)
		}
		c.Stdin = inR
	}
	if len(spec.Env) > 0 {
		if envR, envW, err = os.Pipe(); err != nil {
			closeAll(s.out, outW, s.err, errW, inR, s.in)
			return nil, sandbox.Wrap(sandbox.Internal, op, h.name, err)
		}
		c.ExtraFiles = []*os.File{envR}
	}
	c.Stdout, c.Stderr = outW, errW
	if err := c.Start(); err != nil {
		closeAll(s.out, outW, s.err, errW, inR, s.in, envR, envW)
		return nil, h.p.startError(ctx, op, h.name, err)
	}
	closeAll(outW, errW, inR, envR)
	if envW != nil {
		go func() {
			_, _ = io.WriteString(envW, envFile.String())
			_ = envW.Close()
		}()
	}
	go func() {
		s.waitErr = c.Wait()
		close(s.done)
	}()
	return s, nil
}

// stream is one running `sbx exec` client.
type stream struct {
	c       *exec.Cmd
	out     *os.File
	err     *os.File
	in      *os.File // nil without Spec.Stdin
	done    chan struct{}
	waitErr error // valid after done

	mu      sync.Mutex
	copied  bool
	closed  bool
	inClose sync.Once
}

// Copy copies the client's stdout and stderr until both end.
func (s *stream) Copy(stdout, stderr io.Writer) error {
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, pair := range []struct {
		w io.Writer
		r *os.File
	}{{stdout, s.out}, {stderr, s.err}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := io.Copy(pair.w, pair.r)
			if errors.Is(err, os.ErrClosed) {
				err = nil
			}
			errs[i] = err
			if err != nil {
				_ = s.Close()
			}
		}()
	}
	wg.Wait()
	s.mu.Lock()
	s.copied = true
	s.mu.Unlock()
	return errors.Join(errs...)
}

// Write writes to the command's stdin.
func (s *stream) Write(p []byte) (int, error) {
	if s.in == nil {
		return 0, sandbox.Errorf(sandbox.FailedPrecondition, Name+".stdin", "", "the command was started without stdin")
	}
	return s.in.Write(p)
}

// CloseStdin sends EOF: `sbx exec -i` passes it on, as docker exec does.
func (s *stream) CloseStdin() error {
	if s.in == nil {
		return nil
	}
	var err error
	s.inClose.Do(func() { err = s.in.Close() })
	return err
}

// Close abandons the stream. Before the output ended it kills the host
// client (the command in the sandbox keeps running, as under docker
// exec); after, it only releases the pipes.
func (s *stream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	copied := s.copied
	s.mu.Unlock()
	if !copied {
		select {
		case <-s.done:
		default:
			_ = s.c.Process.Kill()
		}
	}
	_ = s.CloseStdin()
	_ = s.out.Close()
	_ = s.err.Close()
	return nil
}

// Exit returns the client's exit status, which is the command's.
func (s *stream) Exit(ctx context.Context) (int, error) {
	select {
	case <-s.done:
	case <-ctx.Done():
		return 0, sandbox.Wrap(sandbox.Canceled, Name+".exec", "", ctx.Err())
	}
	var ee *exec.ExitError
	if errors.As(s.waitErr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return ee.ExitCode(), nil
	}
	if s.waitErr != nil {
		return 0, sandbox.Wrap(sandbox.Unavailable, Name+".exec", "", fmt.Errorf("sbx exec: %w", s.waitErr))
	}
	return 0, nil
}
