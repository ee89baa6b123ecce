package qemu

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/d10ffeed/corral/sandbox"
)

// modules are the guest kernel's modules the initramfs loads, in
// dependency order (Debian's cloud kernel builds virtio as modules).
var modules = []string{
	"drivers/virtio/virtio_ring", "drivers/virtio/virtio", "drivers/virtio/virtio_pci_legacy_dev",
	"drivers/virtio/virtio_pci_modern_dev", "drivers/virtio/virtio_pci", "drivers/char/virtio_console",
	"drivers/block/virtio_blk", "net/core/failover", "drivers/net/net_failover", "drivers/net/virtio_net",
}

// kernelDir finds the unpacked kernel: Options.Kernel, else the directory
// scripts/setup-qemu.sh named in <cache>/current.
func kernelDir(opt, cache string) (string, error) {
	if opt != "" {
		return opt, nil
	}
	b, err := os.ReadFile(filepath.Join(cache, "current"))
	if err != nil {
		return "", fmt.Errorf("no guest kernel: run scripts/setup-qemu.sh or set Options.Kernel (%w)", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// findAgent locates the guest agent binary.
func findAgent(opt string) (string, error) {
	cands := []string{opt, os.Getenv("CORRAL_QEMU_AGENT")}
	if p, err := exec.LookPath("corral-guest"); err == nil {
		cands = append(cands, p)
	}
	if exe, err := os.Executable(); err == nil {
		cands = append(cands, filepath.Join(filepath.Dir(exe), "corral-guest"))
	}
	for _, c := range cands {
		if c == "" {
			continue
		}
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() {
			return c, nil
		}
		if c == opt {
			return "", fmt.Errorf("guest agent %s not found", c)
		}
	}
	return "", fmt.Errorf("no guest agent: build it with CGO_ENABLED=0 go build ./cmd/corral-guest and set Options.Agent or CORRAL_QEMU_AGENT")
}

// buildInitrd writes (once per agent and kernel) the initramfs: the agent
// as /init, the modules and their order.
func buildInitrd(cache, kdir, agent string) (string, error) {
	ab, err := os.ReadFile(agent)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(append(ab, kdir...))
	out := filepath.Join(cache, "initrd", hex.EncodeToString(sum[:8])+".cpio")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	var b bytes.Buffer
	w := &cpioWriter{w: &b}
	w.add("init", 0o100755, ab)
	w.add("modules", 0o40755, nil)
	var order []string
	for _, m := range modules {
		data, err := os.ReadFile(filepath.Join(kdir, "modules", "kernel", m+".ko"))
		if err != nil {
			return "", fmt.Errorf("kernel module %s: %w", m, err)
		}
		name := filepath.Base(m) + ".ko"
		w.add("modules/"+name, 0o100644, data)
		order = append(order, name)
	}
	w.add("modules.order", 0o100644, []byte(strings.Join(order, "\n")+"\n"))
	w.trailer()
	return out, writeAtomic(out, b.Bytes())
}

// cpioWriter writes the newc format the kernel unpacks.
type cpioWriter struct {
	w   io.Writer
	ino int
}

func (c *cpioWriter) add(name string, mode int, data []byte) {
	c.ino++
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	_, _ = io.WriteString(c.w, hdr+name+"\x00")
	c.pad(110 + len(name) + 1)
	_, _ = c.w.Write(data)
	c.pad(len(data))
}

func (c *cpioWriter) pad(n int) {
	if r := n % 4; r != 0 {
		_, _ = c.w.Write(make([]byte, 4-r))
	}
}

func (c *cpioWriter) trailer() { c.add("TRAILER!!!", 0, nil) }

func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp" + randHex(4)
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// rootImage returns the cached ext4 image of the root file system: from
// Options.Image (a local Docker image, exported; cached by image id), from
// Options.RootDir (cached by a digest of its tree), or by default a
// BusyBox root from the host's static /bin/busybox.
func (p *Provider) rootImage(ctx context.Context) (string, error) {
	p.rootMu.Lock()
	defer p.rootMu.Unlock()
	if p.rootPath != "" {
		return p.rootPath, nil
	}
	var key string
	var fill func(dir string) error
	switch {
	case p.opts.Image != "":
		out, err := exec.CommandContext(ctx, "docker", "image", "inspect", "--format", "{{.Id}}", p.opts.Image).Output()
		if err != nil {
			return "", sandbox.Wrap(sandbox.NotFound, "qemu.image", p.opts.Image, fmt.Errorf("docker image inspect: %w", err))
		}
		key = "docker-" + strings.TrimPrefix(strings.TrimSpace(string(out)), "sha256:")[:16]
		fill = func(dir string) error { return dockerExport(ctx, p.opts.Image, dir) }
	case p.opts.RootDir != "":
		d, err := treeDigest(p.opts.RootDir)
		if err != nil {
			return "", sandbox.Wrap(sandbox.InvalidArgument, "qemu.image", p.opts.RootDir, err)
		}
		key = "dir-" + d
		fill = func(dir string) error { return copyTree(ctx, p.opts.RootDir, dir) }
	default:
		bb, err := os.ReadFile("/bin/busybox")
		if err != nil {
			return "", sandbox.Wrap(sandbox.FailedPrecondition, "qemu.image", "busybox",
				fmt.Errorf("no Options.Image or RootDir and no static /bin/busybox (Debian busybox-static): %w", err))
		}
		sum := sha256.Sum256(bb)
		key = "busybox-" + hex.EncodeToString(sum[:8])
		fill = func(dir string) error { return busyboxRoot(ctx, dir) }
	}
	img := filepath.Join(p.cache, "images", key+".ext4")
	if _, err := os.Stat(img); err != nil {
		if err := mkExt4(ctx, img, fill); err != nil {
			return "", sandbox.Wrap(sandbox.Internal, "qemu.image", key, err)
		}
	}
	p.rootPath = img
	return img, nil
}

// workspaceBase returns the cached empty ext4 image every workspace
// overlay starts from.
func (p *Provider) workspaceBase(ctx context.Context) (string, error) {
	p.rootMu.Lock()
	defer p.rootMu.Unlock()
	img := filepath.Join(p.cache, "images", fmt.Sprintf("workspace-%dm.ext4", p.opts.WorkspaceMB))
	if _, err := os.Stat(img); err == nil {
		return img, nil
	}
	// The workspace root must list only what the user put there: no
	// lost+found.
	tmp := img + ".new"
	if err := mkExt4Size(ctx, tmp, int64(p.opts.WorkspaceMB)<<20, func(string) error { return nil }); err != nil {
		return "", sandbox.Wrap(sandbox.Internal, "qemu.image", "workspace", err)
	}
	if out, err := exec.CommandContext(ctx, "debugfs", "-w", "-R", "rmdir lost+found", tmp).CombinedOutput(); err != nil {
		return "", sandbox.Wrap(sandbox.Internal, "qemu.image", "workspace", fmt.Errorf("debugfs: %v: %s", err, out))
	}
	if err := os.Rename(tmp, img); err != nil {
		return "", sandbox.Wrap(sandbox.Internal, "qemu.image", "workspace", err)
	}
	return img, nil
}

func mkExt4(ctx context.Context, img string, fill func(dir string) error) error {
	return mkExt4Size(ctx, img, 0, fill)
}

// mkExt4Size fills a fresh directory and makes an ext4 image of it with
// mke2fs -d (size 0: twice the tree plus 256 MiB, sparse).
func mkExt4Size(ctx context.Context, img string, size int64, fill func(dir string) error) error {
	if err := os.MkdirAll(filepath.Dir(img), 0o755); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(filepath.Dir(img), ".tree-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := fill(dir); err != nil {
		return err
	}
	if size == 0 {
		var used int64
		_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, _ error) error {
			if fi, err := d.Info(); err == nil && fi.Mode().IsRegular() {
				used += fi.Size()
			}
			return nil
		})
		size = 2*used + 256<<20
	}
	tmp := img + ".tmp" + randHex(4)
	defer os.Remove(tmp)
	if err := os.WriteFile(tmp, nil, 0o644); err != nil {
		return err
	}
	if err := os.Truncate(tmp, size); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "mke2fs", "-q", "-t", "ext4", "-E", "root_owner=0:0", "-d", dir, "-F", tmp).CombinedOutput(); err != nil {
		return fmt.Errorf("mke2fs: %v: %s", err, out)
	}
	return os.Rename(tmp, img)
}

// dockerExport unpacks a local image's file system into dir.
func dockerExport(ctx context.Context, image, dir string) error {
	out, err := exec.CommandContext(ctx, "docker", "create", image, "/bin/true").Output()
	if err != nil {
		return fmt.Errorf("docker create %s: %w", image, err)
	}
	cid := strings.TrimSpace(string(out))
	defer func() { _ = exec.Command("docker", "rm", "-f", cid).Run() }()
	exp := exec.CommandContext(ctx, "docker", "export", cid)
	untar := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	pr, err := exp.StdoutPipe()
	if err != nil {
		return err
	}
	untar.Stdin = pr
	var stderr bytes.Buffer
	untar.Stderr = &stderr
	if err := exp.Start(); err != nil {
		return err
	}
	if err := untar.Run(); err != nil {
		_ = exp.Wait()
		return fmt.Errorf("unpacking the export of %s: %v: %s", image, err, stderr.String())
	}
	return exp.Wait()
}

// busyboxRoot is the default root: the static BusyBox with every applet.
func busyboxRoot(ctx context.Context, dir string) error {
	for _, d := range []string{"bin", "sbin", "usr/bin", "etc", "tmp", "root", "workspace", "proc", "sys", "dev"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	_ = os.Chmod(filepath.Join(dir, "tmp"), 0o1777)
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "busybox"), bb, 0o755); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "/bin/busybox", "--list").Output()
	if err != nil {
		return err
	}
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" {
			_ = os.Symlink("busybox", filepath.Join(dir, "bin", a))
		}
	}
	files := map[string]string{"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n", "etc/group": "root:x:0:\n", "etc/hosts": "127.0.0.1 localhost\n"}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func copyTree(ctx context.Context, src, dst string) error {
	if out, err := exec.CommandContext(ctx, "cp", "-a", src+"/.", dst).CombinedOutput(); err != nil {
		return fmt.Errorf("cp -a %s: %v: %s", src, err, out)
	}
	return nil
}

// treeDigest digests names, sizes, modes and times under dir.
func treeDigest(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d %o %d\n", path, fi.Size(), fi.Mode(), fi.ModTime().UnixNano())
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)[:8]), nil
}
