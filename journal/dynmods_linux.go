//go:build linux

package journal

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/d10ffeed/corral/sandbox"
)

// A run's wrapper moves the agent's subshell into the run's cgroup (echo
// 0 > cgroup.procs). A cgroup migration takes the kernel's
// cgroup_threadgroup_rwsem for writing, and when no migration happened in
// the last grace period or two, that first waits for an RCU grace period
// (rcu_sync_enter): about 13–20 ms on the two-core machines measured, on
// every run that follows a pause of 20 ms or more, so on every run of a
// chat. Back-to-back migrations cost 0.1 ms. The cgroup v2 mount option
// favordynmods (Linux 6.0) keeps that lock in the mode where a migration
// need not wait, at a small cost to every fork and exit on the host (from
// Linux 6.18 it switches cgroup.procs writes to a per-process lock, and
// the kernel keeps that switch until it reboots, whatever the mount says
// later);
// LookHostCgroup tells whether the hierarchy has it and
// HostCgroup.EnableFavorDynMods sets it.

// HostCgroup describes the cgroup v2 hierarchy that wrappers started by
// this process make their runs' cgroups in (they join the cgroup of the
// process that spawns them, so this is the hierarchy this process sees).
type HostCgroup struct {
	// Mount is the hierarchy's mount point ("" when there is none).
	Mount string
	// FavorDynMods reports whether it is mounted with favordynmods.
	FavorDynMods bool

	mountFlags uintptr  // the mount's own flags (nosuid, nodev, …), kept by a remount
	super      []string // the superblock's options other than rw/ro
}

// LookHostCgroup reads this process's mount table for the cgroup v2
// hierarchy wrappers would use (the first cgroup2 mount, as the wrapper's
// cs_v2root takes the usual places first). The zero HostCgroup means none.
func LookHostCgroup() (HostCgroup, error) {
	root := cgroupV2Root()
	if root == "" {
		return HostCgroup{}, nil
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return HostCgroup{}, sandbox.Wrap(sandbox.Unavailable, "journal.cgroup", root, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		hc, ok := parseMountinfoLine(sc.Text(), root)
		if ok {
			return hc, nil
		}
	}
	if err := sc.Err(); err != nil {
		return HostCgroup{}, sandbox.Wrap(sandbox.Unavailable, "journal.cgroup", root, err)
	}
	return HostCgroup{Mount: root}, nil
}

// parseMountinfoLine parses one line of /proc/PID/mountinfo ("ID PARENT
// MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER") when it
// is the cgroup2 mount at point.
func parseMountinfoLine(line, point string) (HostCgroup, bool) {
	pre, post, ok := strings.Cut(line, " - ")
	if !ok {
		return HostCgroup{}, false
	}
	f, g := strings.Fields(pre), strings.Fields(post)
	if len(f) < 6 || len(g) < 3 || g[0] != "cgroup2" || unescapeMount(f[4]) != point {
		return HostCgroup{}, false
	}
	hc := HostCgroup{Mount: point}
	for _, o := range strings.Split(f[5], ",") {
		hc.mountFlags |= mountFlag(o)
	}
	for _, o := range strings.Split(g[2], ",") {
		switch o {
		case "rw", "ro", "":
		case "favordynmods":
			hc.FavorDynMods = true
			hc.super = append(hc.super, o)
		default:
			hc.super = append(hc.super, o)
		}
	}
	return hc, true
}

// mountFlag maps a per-mount option of mountinfo to its MS_ flag.
func mountFlag(o string) uintptr {
	switch o {
	case "ro":
		return syscall.MS_RDONLY
	case "nosuid":
		return syscall.MS_NOSUID
	case "nodev":
		return syscall.MS_NODEV
	case "noexec":
		return syscall.MS_NOEXEC
	case "relatime":
		return syscall.MS_RELATIME
	case "noatime":
		return syscall.MS_NOATIME
	case "nodiratime":
		return syscall.MS_NODIRATIME
	case "strictatime":
		return syscall.MS_STRICTATIME
	}
	return 0
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// EnableFavorDynMods remounts the hierarchy with favordynmods, keeping its other
// options and the mount's flags. It is host-wide (every cgroup of that
// hierarchy, every process's forks and exits) and needs root (or
// CAP_SYS_ADMIN over the mount) and Linux 6.0 or later. It does nothing
// when the option is set already.
func (hc HostCgroup) EnableFavorDynMods() error {
	if hc.Mount == "" {
		return sandbox.Errorf(sandbox.Unimplemented, "journal.cgroup", "", "no cgroup v2 hierarchy is mounted")
	}
	if hc.FavorDynMods {
		return nil
	}
	return hc.remount(withFavor(hc.super, true))
}

// DisableFavorDynMods remounts the hierarchy without favordynmods (tests
// restore the host's setting with it).
func (hc HostCgroup) DisableFavorDynMods() error {
	if hc.Mount == "" || !hc.FavorDynMods {
		return nil
	}
	return hc.remount(withFavor(hc.super, false))
}

// withFavor returns the superblock options super with favordynmods added
// (once) or removed.
func withFavor(super []string, on bool) []string {
	out := slices.DeleteFunc(slices.Clone(super), func(o string) bool { return o == "favordynmods" })
	if on {
		out = append(out, "favordynmods")
	}
	return out
}

// remount remounts the hierarchy with the superblock options super (an
// option left out is turned off) and the mount's own flags as they are.
func (hc HostCgroup) remount(super []string) error {
	err := syscall.Mount("cgroup2", hc.Mount, "cgroup2", syscall.MS_REMOUNT|hc.mountFlags, strings.Join(super, ","))
	if err == nil {
		return nil
	}
	code := sandbox.Internal
	switch err {
	case syscall.EPERM, syscall.EACCES:
		code = sandbox.PermissionDenied
	case syscall.EINVAL:
		code = sandbox.Unimplemented // a kernel before 6.0 knows no favordynmods
	}
	return sandbox.Wrap(code, "journal.cgroup", hc.Mount, err)
}
