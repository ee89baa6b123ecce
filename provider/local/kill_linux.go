package local

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"syscall"
	"time"
)

// groupAlive reports whether process group pgid has a member that is not a
// zombie. Zombies count as gone: on hosts whose init never reaps orphans a
// dead grandchild stays a zombie for ever.
func groupAlive(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	alive := false
	eachProc(func(pid int, stat []byte) bool {
		state, pg, ok := parseStat(stat)
		if ok && pg == pgid && state != 'Z' && state != 'X' {
			alive = true
			return false
		}
		return true
	})
	return alive
}

// parseStat returns the state and process group from /proc/<pid>/stat.
func parseStat(stat []byte) (state byte, pgid int, ok bool) {
	// The command name is in parentheses and may contain anything, so
	// fields are counted from the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0, 0, false
	}
	fields := bytes.Fields(stat[i+2:])
	// fields[0]=state [1]=ppid [2]=pgrp
	if len(fields) < 3 {
		return 0, 0, false
	}
	pg, err := strconv.Atoi(string(fields[2]))
	if err != nil || len(fields[0]) == 0 {
		return 0, 0, false
	}
	return fields[0][0], pg, true
}

// eachProc calls fn with every process's pid and stat line until fn
// returns false.
func eachProc(fn func(pid int, stat []byte) bool) {
	d, err := os.Open("/proc")
	if err != nil {
		return
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue
		}
		if !fn(pid, stat) {
			return
		}
	}
}

// killByMarker kills every live process whose environment carries
// SandboxIDEnv=id: processes an earlier corral process started in this
// sandbox, and their descendants that kept the environment.
func killByMarker(ctx context.Context, id string, grace time.Duration, log *slog.Logger) {
	marker := []byte(SandboxIDEnv + "=" + id + "\x00")
	self := os.Getpid()
	find := func() []int {
		var pids []int
		eachProc(func(pid int, stat []byte) bool {
			if pid == self {
				return true
			}
			if state, _, ok := parseStat(stat); !ok || state == 'Z' {
				return true
			}
			env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
			if err == nil && (bytes.Contains(env, append([]byte{0}, marker...)) || bytes.HasPrefix(env, marker)) {
				pids = append(pids, pid)
			}
			return true
		})
		return pids
	}
	pids := find()
	if len(pids) == 0 {
		return
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		if pids = find(); len(pids) == 0 {
			return
		}
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	time.Sleep(50 * time.Millisecond)
	if left := find(); len(left) > 0 {
		log.Warn("local: processes survived destroy", "sandbox", id, "pids", left)
	}
}
