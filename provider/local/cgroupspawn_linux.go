//go:build linux

package local

import (
	"context"
	"os"
	"syscall"

	"github.com/d10ffeed/corral/sandbox"
)

var _ sandbox.CgroupSpawner = (*handle)(nil)

// SpawnInCgroup is Spawn with the process started in the cgroup v2
// directory dir (clone3 with CLONE_INTO_CGROUP): it is in that cgroup from
// its first instruction, and no migration (which waits for an RCU grace
// period on a hierarchy without favordynmods) is made. Unimplemented when
// the directory cannot be opened or the kernel refuses.
func (h *handle) SpawnInCgroup(ctx context.Context, cmd sandbox.Command, dir string) (sandbox.Process, error) {
	if cmd.Stdin != nil {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "local.spawn", h.id, "Command.Stdin is for Exec; write to Process.Stdin instead")
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.Unimplemented, "local.spawn", dir, os.NewSyscallError("open", err))
	}
	defer syscall.Close(fd) // the child has its cgroup once started
	pr, err := h.startIn(ctx, "local.spawn", cmd, true, fd)
	if err != nil {
		return nil, err
	}
	return h.watchSpawned(ctx, cmd, pr), nil
}

// intoCgroup makes the process start in the cgroup open as fd.
func intoCgroup(a *syscall.SysProcAttr, fd int) {
	a.UseCgroupFD, a.CgroupFD = true, fd
}
