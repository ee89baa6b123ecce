package qemu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// template returns the boot template for c's configuration, making it
// first when there is none: a VM booted cold, snapshotted once its agent
// answered, and destroyed. Templates live in <Cache>/templates/<digest of
// the configuration and the images>.
func (p *Provider) template(ctx context.Context, c *vmConfig, root, wsBase string) (*snapMeta, error) {
	key := digest(fmt.Sprint(c.Accel, c.Machine, c.CPUs, c.MemoryMB, c.Kernel, c.Initrd, c.TSCkHz, c.Network, root, wsBase, p.qemu))
	dir := filepath.Join(p.cache, "templates", key)
	load := func() (*snapMeta, error) {
		var m snapMeta
		if err := readJSON(filepath.Join(dir, "snapshot.json"), &m); err != nil {
			return nil, err
		}
		m.dir, m.template = dir, true
		return &m, nil
	}
	if m, err := load(); err == nil {
		return m, nil
	}
	p.tmplMu.Lock()
	defer p.tmplMu.Unlock()
	if m, err := load(); err == nil {
		return m, nil
	}
	tc := *c
	tc.ID = "tmpl-" + key + "-" + randHex(3)
	tc.Labels = nil
	v := p.vmFor(tc.ID)
	if err := os.MkdirAll(v.dir, 0o755); err != nil {
		return nil, err
	}
	h, err := p.coldBoot(ctx, "qemu.template", v, &tc, root, wsBase)
	if err != nil {
		return nil, err
	}
	defer func() { _ = p.Destroy(context.WithoutCancel(ctx), tc.ID) }()
	// The guest's page cache holds what boot read; drop it so the memory
	// file is small.
	if _, err := h.Procs().Run(ctx, "qemu.template", []string{"sh", "-c", "sync; echo 3 > /proc/sys/vm/drop_caches"}, nil, ""); err != nil {
		return nil, err
	}
	m, err := h.snapshot(ctx, "qemu.template", "template")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	if err := os.Rename(m.dir, dir); err != nil {
		_ = os.RemoveAll(m.dir)
		if !errors.Is(err, os.ErrExist) {
			return nil, err
		}
	}
	p.log.Info("qemu: boot template made", "dir", dir, "memBytes", strconv.FormatInt(m.MemBytes, 10))
	return load()
}
