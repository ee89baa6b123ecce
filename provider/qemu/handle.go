package qemu

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"

	"github.com/d10ffeed/corral/provider/internal/execkit"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// workspace is the workspace root inside the guest (the second disk).
const workspace = "/workspace"

// handle is one VM.
type handle struct {
	*execkit.Kit // FS, Exec, Spawn, SetEnv through the guest agent
	p            *Provider
	v            vm
	c            *vmConfig
	a            *agentConn
}

var _ sandbox.Handle = (*handle)(nil)

func (p *Provider) newHandle(v vm, c *vmConfig) *handle {
	h := &handle{p: p, v: v, c: c, a: agentFor(v, c.ID)}
	h.Kit = execkit.New(backend{h.a}, execproc.Options{Provider: Name, ID: c.ID, Root: workspace,
		KillGrace: p.opts.KillGrace, Kill: h.a.kill, Logger: p.log}, nil)
	return h
}

// ID returns the sandbox id.
func (h *handle) ID() string { return h.c.ID }

// Provider returns "qemu".
func (h *handle) Provider() string { return Name }

// WorkspaceRoot returns /workspace.
func (h *handle) WorkspaceRoot() string { return workspace }

// Capabilities returns the provider's capabilities.
func (h *handle) Capabilities() sandbox.Capabilities { return capabilities() }

// ConnectPort forwards a free host port on 127.0.0.1 to port in the guest
// (QEMU's user-mode network) and returns it. A VM created with the network
// denied has no network device: FailedPrecondition.
func (h *handle) ConnectPort(ctx context.Context, port int) (sandbox.Endpoint, error) {
	const op = "qemu.port"
	if port <= 0 || port > 65535 {
		return sandbox.Endpoint{}, sandbox.Errorf(sandbox.InvalidArgument, op, strconv.Itoa(port), "invalid port")
	}
	if !h.c.Network {
		return sandbox.Endpoint{}, sandbox.Errorf(sandbox.FailedPrecondition, op, h.c.ID, "sandbox %s was created with the network denied; it has no network device", h.c.ID)
	}
	h.p.rootMu.Lock()
	defer h.p.rootMu.Unlock()
	c, err := readConfig(h.v.configPath())
	if err != nil {
		return sandbox.Endpoint{}, sandbox.Wrap(sandbox.NotFound, op, h.c.ID, err)
	}
	if hp := c.Ports[port]; hp != 0 {
		return sandbox.Endpoint{URL: fmt.Sprintf("http://127.0.0.1:%d", hp)}, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return sandbox.Endpoint{}, sandbox.Wrap(sandbox.Unavailable, op, h.c.ID, err)
	}
	hp := l.Addr().(*net.TCPAddr).Port
	l.Close()
	q, err := dialQMP(ctx, h.v.qmp)
	if err != nil {
		return sandbox.Endpoint{}, sandbox.Wrap(sandbox.Unavailable, op, h.c.ID, err)
	}
	defer q.close()
	out, err := q.do(ctx, "human-monitor-command", map[string]any{"command-line": fmt.Sprintf("hostfwd_add net0 tcp:127.0.0.1:%d-:%d", hp, port)})
	if err != nil {
		return sandbox.Endpoint{}, sandbox.Wrap(sandbox.Unavailable, op, h.c.ID, err)
	}
	if s, _ := strconv.Unquote(string(out)); s != "" {
		return sandbox.Endpoint{}, sandbox.Errorf(sandbox.Unavailable, op, h.c.ID, "hostfwd_add: %s", s)
	}
	if c.Ports == nil {
		c.Ports = map[int]int{}
	}
	c.Ports[port] = hp
	if err := writeConfig(h.v.configPath(), c); err != nil {
		return sandbox.Endpoint{}, sandbox.Wrap(sandbox.Internal, op, h.c.ID, err)
	}
	return sandbox.Endpoint{URL: fmt.Sprintf("http://127.0.0.1:%d", hp)}, nil
}

// Destroy ends the VM and removes it.
func (h *handle) Destroy(ctx context.Context) error { return h.p.Destroy(ctx, h.c.ID) }

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}
