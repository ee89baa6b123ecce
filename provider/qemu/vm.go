package qemu

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// vmConfig is what it takes to start (or restore into) one VM. It is
// persisted in the VM's directory and in snapshots; it never holds the
// environment.
type vmConfig struct {
	ID        string            `json:"id"`
	Accel     string            `json:"accel"` // "kvm" or "tcg"
	Machine   string            `json:"machine"`
	CPUs      int               `json:"cpus"`
	MemoryMB  int               `json:"memoryMB"`
	Kernel    string            `json:"kernel"`
	Initrd    string            `json:"initrd"`
	TSCkHz    int               `json:"tscKHz,omitempty"`
	Network   bool              `json:"network"` // user-mode network attached
	Labels    map[string]string `json:"labels,omitempty"`
	CreatedAt time.Time         `json:"createdAt"`
	// Ports maps guest ports to the host ports forwarded to them.
	Ports map[int]int `json:"ports,omitempty"`
}

// vm is one VM's directory and sockets.
type vm struct {
	dir   string
	socks []string // agent sockets, one per virtio-serial port
	qmp   string   // QMP socket
}

// agentPorts is how many agent ports a VM has: QEMU's socket chardev takes
// one client, so a second corral process (a takeover) uses the next port
// while the first still holds its own.
const agentPorts = 2

func (p *Provider) vmFor(id string) vm {
	dir := filepath.Join(p.cache, "vms", id)
	// Unix socket paths are short (108 bytes): they live under /tmp by a
	// digest of the VM directory.
	sum := sha256.Sum256([]byte(dir))
	sd := filepath.Join(os.TempDir(), "corral-qemu-"+hex.EncodeToString(sum[:6]))
	v := vm{dir: dir, qmp: filepath.Join(sd, "qmp.sock")}
	for i := 0; i < agentPorts; i++ {
		v.socks = append(v.socks, filepath.Join(sd, fmt.Sprintf("agent%d.sock", i)))
	}
	return v
}

// sockDir is the directory of the VM's sockets.
func (v vm) sockDir() string { return filepath.Dir(v.qmp) }

// portName is the virtio-serial name of agent port i.
func portName(i int) string {
	if i == 0 {
		return "corral.agent"
	}
	return fmt.Sprintf("corral.agent.%d", i)
}

func (v vm) configPath() string { return filepath.Join(v.dir, "vm.json") }

func readConfig(path string) (*vmConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c vmConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

func writeConfig(path string, c *vmConfig) error { return writeJSON(path, c) }

// argv is QEMU's command line for c in v; incoming adds -incoming defer.
func (v vm) argv(c *vmConfig, incoming bool) []string {
	cpu := "max"
	if c.Accel == "kvm" {
		cpu = "host"
	}
	app := "console=ttyS0 quiet panic=-1 corral.root=corral-root corral.ws=corral-ws corral.hostname=" + hostName(c.ID)
	if c.TSCkHz > 0 {
		app += " tsc_early_khz=" + strconv.Itoa(c.TSCkHz)
	}
	if c.Network {
		app += " corral.net=1"
	}
	a := []string{"-name", "corral-" + c.ID, "-accel", c.Accel, "-cpu", cpu,
		"-m", strconv.Itoa(c.MemoryMB), "-smp", strconv.Itoa(c.CPUs), "-M", c.Machine,
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-kernel", c.Kernel, "-initrd", c.Initrd, "-append", app,
		"-serial", "file:" + filepath.Join(v.dir, "console.log"),
		"-drive", "if=none,id=root,format=qcow2,file=" + filepath.Join(v.dir, "root.qcow2"),
		"-device", "virtio-blk-pci,drive=root,serial=corral-root",
		"-drive", "if=none,id=ws,format=qcow2,file=" + filepath.Join(v.dir, "ws.qcow2"),
		"-device", "virtio-blk-pci,drive=ws,serial=corral-ws",
		"-device", "virtio-serial-pci",
	}
	for i, s := range v.socks {
		a = append(a, "-chardev", fmt.Sprintf("socket,id=agent%d,path=%s,server=on,wait=off", i, s),
			"-device", fmt.Sprintf("virtserialport,chardev=agent%d,name=%s", i, portName(i)))
	}
	a = append(a,
		"-qmp", "unix:"+v.qmp+",server=on,wait=off",
		"-daemonize", "-pidfile", filepath.Join(v.dir, "qemu.pid"),
	)
	if c.Network {
		nd := "user,id=net0"
		for gp, hp := range c.Ports {
			nd += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-:%d", hp, gp)
		}
		a = append(a, "-netdev", nd, "-device", "virtio-net-pci,netdev=net0,mac=52:54:00:12:34:56")
	}
	if incoming {
		a = append(a, "-incoming", "defer")
	}
	return a
}

func hostName(id string) string {
	h := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(id))
	if len(h) > 63 {
		h = h[:63]
	}
	return h
}

// launch starts QEMU daemonized; it returns once QEMU initialised.
func (p *Provider) launch(ctx context.Context, v vm, c *vmConfig, incoming bool) error {
	if err := os.MkdirAll(v.sockDir(), 0o700); err != nil {
		return err
	}
	for _, s := range v.socks {
		_ = os.Remove(s)
	}
	_ = os.Remove(v.qmp)
	cmd := exec.CommandContext(ctx, p.qemu, v.argv(c, incoming)...)
	cmd.Dir = v.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", p.qemu, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// pid returns the VM's QEMU pid if that process is alive and is this
// VM's QEMU (its command line names the VM directory), else 0.
func (v vm) pid() int {
	b, err := os.ReadFile(filepath.Join(v.dir, "qemu.pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	cl, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || !strings.Contains(string(cl), v.dir+"/") {
		return 0
	}
	return pid
}

// stop ends the VM's QEMU: quit on QMP, then SIGKILL.
func (v vm) stop(ctx context.Context) {
	pid := v.pid()
	if pid == 0 {
		return
	}
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if q, err := dialQMP(qctx, v.qmp); err == nil {
		_, _ = q.do(qctx, "quit", nil)
		q.close()
	}
	cancel()
	for i := 0; i < 100 && v.pid() != 0; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if pid := v.pid(); pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		for i := 0; i < 250 && v.pid() != 0; i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// qmp is a minimal QMP client.
type qmp struct {
	c net.Conn
	r *bufio.Reader
}

func dialQMP(ctx context.Context, path string) (*qmp, error) {
	var d net.Dialer
	var c net.Conn
	for {
		var err error
		if c, err = d.DialContext(ctx, "unix", path); err == nil {
			break
		}
		if sleepCtx(ctx, 20*time.Millisecond) != nil {
			return nil, fmt.Errorf("QMP %s: %w", path, err)
		}
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	q := &qmp{c: c, r: bufio.NewReader(c)}
	if _, err := q.r.ReadBytes('\n'); err != nil { // greeting
		c.Close()
		return nil, err
	}
	if _, err := q.do(ctx, "qmp_capabilities", nil); err != nil {
		c.Close()
		return nil, err
	}
	return q, nil
}

func (q *qmp) close() { _ = q.c.Close() }

// do runs one command and returns its "return" value.
func (q *qmp) do(ctx context.Context, cmd string, args any) (json.RawMessage, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = q.c.SetDeadline(dl)
	}
	req := map[string]any{"execute": cmd}
	if args != nil {
		req["arguments"] = args
	}
	b, _ := json.Marshal(req)
	if _, err := q.c.Write(append(b, '\n')); err != nil {
		return nil, err
	}
	for {
		line, err := q.r.ReadBytes('\n')
		if err != nil {
			if cmd == "quit" {
				return nil, nil
			}
			return nil, err
		}
		var resp struct {
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Class string `json:"class"`
				Desc  string `json:"desc"`
			} `json:"error"`
			Event string `json:"event"`
		}
		if err := json.Unmarshal(line, &resp); err != nil {
			return nil, err
		}
		if resp.Event != "" {
			continue
		}
		if resp.Error != nil {
			return nil, fmt.Errorf("QMP %s: %s: %s", cmd, resp.Error.Class, resp.Error.Desc)
		}
		return resp.Return, nil
	}
}

// waitMigration polls query-migrate until it completed.
func (q *qmp) waitMigration(ctx context.Context) error {
	for {
		r, err := q.do(ctx, "query-migrate", nil)
		if err != nil {
			return err
		}
		var st struct {
			Status      string `json:"status"`
			ErrorDesc   string `json:"error-desc"`
			TotalTimeMS int64  `json:"total-time"`
		}
		_ = json.Unmarshal(r, &st)
		switch st.Status {
		case "completed":
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("migration %s: %s", st.Status, st.ErrorDesc)
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
}

// waitRunning polls query-status until the VM runs.
func (q *qmp) waitRunning(ctx context.Context) error {
	for {
		r, err := q.do(ctx, "query-status", nil)
		if err != nil {
			return err
		}
		var st struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(r, &st)
		switch st.Status {
		case "running":
			return nil
		case "paused", "postmigrate", "prelaunch":
			if _, err := q.do(ctx, "cont", nil); err != nil && st.Status != "prelaunch" {
				return err
			}
		case "internal-error", "shutdown", "guest-panicked":
			return fmt.Errorf("VM status %s", st.Status)
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
}

// qemuImg runs qemu-img.
func qemuImg(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "qemu-img", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("qemu-img %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// copyFile copies a disk file (sparse, reflinked where the file system can).
func copyFile(ctx context.Context, src, dst string) error {
	out, err := exec.CommandContext(ctx, "cp", "--reflink=auto", "--sparse=always", src, dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cp %s: %v: %s", src, err, out)
	}
	return nil
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tscKHz is the host's TSC rate from /proc/cpuinfo (cpu MHz × 1000): under
// TCG the guest's PIT calibration is unreliable, and a wrong rate runs the
// guest clock fast.
func tscKHz() int {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "cpu MHz" {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return int(f * 1000)
			}
		}
	}
	return 0
}

// kvmUsable reports whether KVM can run a stock guest: /dev/kvm opens and
// the CPU has hardware virtualisation (a PVM /dev/kvm, as on our CI
// machines, lacks vmx/svm and cannot run Debian's kernel).
func kvmUsable() bool {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "flags") {
			fs := " " + l + " "
			return strings.Contains(fs, " vmx ") || strings.Contains(fs, " svm ")
		}
	}
	return false
}

var errGone = errors.New("the VM is gone")

func jsonIndent(v any) ([]byte, error)    { return json.MarshalIndent(v, "", "  ") }
func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
