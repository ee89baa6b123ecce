// Command corral-guest is provider/qemu's guest agent. It is the /init of
// the guest's initramfs: as PID 1 it mounts /dev, /proc and /sys, loads the
// virtio modules listed in /modules.order (in that order), mounts the root
// disk and the workspace disk (found by their virtio serial numbers from
// the kernel command line), moves into the root disk, starts itself again
// as the server (a child of init, so the commands it starts are not taken
// for orphans) and reaps every orphan as init must. The server serves the
// host over the virtio-serial port "corral.agent" with the framed protocol
// of provider/qemu/guestproto.
//
// Kernel command line keys: corral.root=SERIAL, corral.ws=SERIAL,
// corral.net=1 (configure eth0 for QEMU's user-mode network with the
// root's ip tool), corral.hostname=NAME.
//
// Outside a VM, `corral-guest -port PATH` serves on an existing device or
// file (for debugging); the protocol is the same.
//
// Build it static: CGO_ENABLED=0 go build -trimpath -buildvcs=false
// ./cmd/corral-guest (without VCS stamps the binary, and so the cached
// initramfs and boot templates made from it, stay the same across commits).
package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/d10ffeed/corral/provider/qemu/guestproto"
)

// defaultPath is the PATH of init and of every command.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func main() {
	port := flag.String("port", "", "serve on this device instead of finding the virtio port (outside a VM)")
	serve := flag.Bool("serve", false, "internal: the server process init starts")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if os.Getpid() == 1 {
		initMain(log)
		return
	}
	inGuest = *serve
	paths := []string{*port}
	if *port == "" {
		var err error
		if paths, err = findPorts(10 * time.Second); err != nil {
			log.Error("no agent port", "err", err)
			os.Exit(1)
		}
	}
	env := []string{"PATH=" + defaultPath, "HOME=/root", "LANG=C.UTF-8"}
	if h, _ := os.Hostname(); h != "" && inGuest {
		env = append(env, "HOSTNAME="+h)
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	r := newReaper()
	chld := make(chan os.Signal, 16)
	signal.Notify(chld, syscall.SIGCHLD)
	go func() {
		for range chld {
			r.reap()
		}
	}()
	// One server per port: each host connection (one per port, as QEMU's
	// socket chardev takes one client) has a session of its own.
	for _, path := range paths {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			log.Error("open port", "path", path, "err", err)
			os.Exit(1)
		}
		s := newServer(log, env, strings.TrimSpace(string(boot)), r)
		go s.writeLoop(f)
		go func() {
			for {
				// The port reads EOF while no host is connected; a new
				// host session starts with its Hello.
				err := s.readLoop(f)
				if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					log.Error("port read", "path", path, "err", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	select {}
}

// inGuest is set in the server init starts: it may set the clock, the
// host name and the random pool.
var inGuest bool

// initMain is PID 1: it boots, starts the server as its child (so the
// commands the server starts have the server as parent, and a process
// whose parent is init is an orphan, as the run journal's scope expects)
// and reaps every orphan. A server that dies is started again.
func initMain(log *slog.Logger) {
	// The kernel starts init with HOME and TERM only.
	_ = os.Setenv("PATH", defaultPath)
	if _, err := boot(log); err != nil {
		log.Error("boot failed", "err", err)
		time.Sleep(time.Second)
		_ = unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
		os.Exit(1)
	}
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	for {
		// The initramfs is out of reach after the move into the root disk;
		// /proc/self/exe still names this binary.
		pid, err := syscall.ForkExec("/proc/self/exe", []string{"corral-guest", "-serve"}, &syscall.ProcAttr{
			Dir: "/", Env: []string{"PATH=" + defaultPath}, Files: []uintptr{0, 1, 2}})
		if err != nil {
			log.Error("starting the server", "err", err)
			time.Sleep(time.Second)
			continue
		}
		for {
			var st syscall.WaitStatus
			p, err := syscall.Wait4(-1, &st, 0, nil)
			if err != nil && !errors.Is(err, syscall.EINTR) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if p == pid {
				log.Error("the server exited; starting it again", "status", int(st))
				break
			}
		}
	}
}

// boot does init's work and returns the corral.* kernel arguments.
func boot(log *slog.Logger) (map[string]string, error) {
	for _, d := range []string{"/dev", "/proc", "/sys", "/newroot"} {
		_ = os.MkdirAll(d, 0o755)
	}
	if err := mountAll([][3]string{{"devtmpfs", "/dev", "devtmpfs"}, {"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}}); err != nil {
		return nil, err
	}
	args := cmdline()
	if order, err := os.ReadFile("/modules.order"); err == nil {
		for _, m := range strings.Fields(string(order)) {
			if err := loadModule("/modules/" + m); err != nil {
				log.Warn("module", "name", m, "err", err)
			}
		}
	}
	root, err := diskBySerial(args["corral.root"], 10*time.Second)
	if err != nil {
		return nil, err
	}
	if err := unix.Mount(root, "/newroot", "ext4", 0, ""); err != nil {
		return nil, fmt.Errorf("mount root %s: %w", root, err)
	}
	if s := args["corral.ws"]; s != "" {
		ws, err := diskBySerial(s, 10*time.Second)
		if err != nil {
			return nil, err
		}
		_ = os.MkdirAll("/newroot/workspace", 0o755)
		if err := unix.Mount(ws, "/newroot/workspace", "ext4", 0, ""); err != nil {
			return nil, fmt.Errorf("mount workspace %s: %w", ws, err)
		}
	}
	for _, m := range []string{"/dev", "/proc", "/sys"} {
		_ = unix.Unmount(m, unix.MNT_DETACH)
	}
	if err := os.Chdir("/newroot"); err != nil {
		return nil, err
	}
	if err := unix.Mount(".", "/", "", unix.MS_MOVE, ""); err != nil {
		return nil, fmt.Errorf("move root: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return nil, fmt.Errorf("chroot: %w", err)
	}
	_ = os.Chdir("/")
	for _, d := range []string{"/dev", "/proc", "/sys", "/tmp", "/root"} {
		_ = os.MkdirAll(d, 0o755)
	}
	_ = os.Chmod("/tmp", 0o1777)
	if err := mountAll([][3]string{{"devtmpfs", "/dev", "devtmpfs"}, {"proc", "/proc", "proc"}, {"sysfs", "/sys", "sysfs"}}); err != nil {
		return nil, err
	}
	_ = os.MkdirAll("/dev/pts", 0o755)
	_ = unix.Mount("devpts", "/dev/pts", "devpts", 0, "")
	_ = os.MkdirAll("/dev/shm", 0o1777)
	_ = unix.Mount("tmpfs", "/dev/shm", "tmpfs", 0, "")
	if h := args["corral.hostname"]; h != "" {
		_ = unix.Sethostname([]byte(h))
	}
	_ = exec.Command("ip", "link", "set", "lo", "up").Run()
	if args["corral.net"] == "1" {
		for _, a := range [][]string{{"link", "set", "eth0", "up"}, {"addr", "add", "10.0.2.15/24", "dev", "eth0"}, {"route", "add", "default", "via", "10.0.2.2"}} {
			if out, err := exec.Command("ip", a...).CombinedOutput(); err != nil {
				log.Warn("network", "cmd", a, "err", err, "out", string(out))
			}
		}
		_ = os.WriteFile("/etc/resolv.conf", []byte("nameserver 10.0.2.3\n"), 0o644)
	}
	return args, nil
}

func mountAll(ms [][3]string) error {
	for _, m := range ms {
		if err := unix.Mount(m[0], m[1], m[2], 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount %s: %w", m[1], err)
		}
	}
	return nil
}

func cmdline() map[string]string {
	b, _ := os.ReadFile("/proc/cmdline")
	out := map[string]string{}
	for _, f := range strings.Fields(string(b)) {
		if k, v, ok := strings.Cut(f, "="); ok && strings.HasPrefix(k, "corral.") {
			out[k] = v
		}
	}
	return out
}

func loadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.FinitModule(int(f.Fd()), "", 0); err != nil && !errors.Is(err, unix.EEXIST) {
		return err
	}
	return nil
}

// diskBySerial waits for the virtio disk with the given serial.
func diskBySerial(serial string, wait time.Duration) (string, error) {
	if serial == "" {
		return "", errors.New("no disk serial on the kernel command line")
	}
	end := time.Now().Add(wait)
	for {
		ms, _ := filepath.Glob("/sys/block/vd*/serial")
		for _, m := range ms {
			if b, err := os.ReadFile(m); err == nil && strings.TrimSpace(string(b)) == serial {
				return "/dev/" + filepath.Base(filepath.Dir(m)), nil
			}
		}
		if time.Now().After(end) {
			return "", fmt.Errorf("no virtio disk with serial %q", serial)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// findPorts waits for the virtio-serial ports named guestproto.PortName
// or PortName.N and returns their devices.
func findPorts(wait time.Duration) ([]string, error) {
	end := time.Now().Add(wait)
	settled := false
	for {
		var out []string
		ms, _ := filepath.Glob("/sys/class/virtio-ports/*/name")
		for _, m := range ms {
			b, err := os.ReadFile(m)
			n := strings.TrimSpace(string(b))
			if err == nil && (n == guestproto.PortName || strings.HasPrefix(n, guestproto.PortName+".")) {
				out = append(out, "/dev/"+filepath.Base(filepath.Dir(m)))
			}
		}
		if len(out) > 0 && settled {
			return out, nil
		}
		if len(out) > 0 { // the other ports of the device appear with it
			settled = true
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if time.Now().After(end) {
			return nil, fmt.Errorf("no virtio-serial port %q", guestproto.PortName)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stepClock sets the clock to the host's when they differ by more than a
// second (a restored VM wakes with the time of its snapshot). Only the
// guest's server does it.
func stepClock(hostNano int64) {
	if hostNano == 0 || !inGuest {
		return
	}
	d := time.Now().UnixNano() - hostNano
	if d < int64(time.Second) && d > -int64(time.Second) {
		return
	}
	tv := unix.NsecToTimeval(hostNano)
	_ = unix.Settimeofday(&tv)
}

func uptime() float64 {
	b, _ := os.ReadFile("/proc/uptime")
	fs := bytes.Fields(b)
	if len(fs) == 0 {
		return 0
	}
	f, _ := strconv.ParseFloat(string(fs[0]), 64)
	return f
}

// reseed mixes the host's seed into the random pool (credited) and forces
// the kernel's generator to reseed from it. Only the guest's server does it.
func reseed(seed []byte) {
	if len(seed) == 0 || !inGuest {
		return
	}
	f, err := os.OpenFile("/dev/urandom", os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer f.Close()
	// struct rand_pool_info { int entropy_count; int buf_size; __u32 buf[]; }
	b := make([]byte, 8+len(seed))
	binary.NativeEndian.PutUint32(b[0:], uint32(8*len(seed)))
	binary.NativeEndian.PutUint32(b[4:], uint32(len(seed)))
	copy(b[8:], seed)
	_, _, _ = unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.RNDADDENTROPY, uintptr(unsafe.Pointer(&b[0])))
	_, _, _ = unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.RNDRESEEDCRNG, 0)
}

// setHostname sets the host name when it differs. Only the guest's server
// does it.
func setHostname(h string) {
	if h == "" || !inGuest {
		return
	}
	if cur, _ := os.Hostname(); cur != h {
		_ = unix.Sethostname([]byte(h))
	}
}
