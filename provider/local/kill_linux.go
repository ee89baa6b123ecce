package local

import (
	"bytes"
	"context"
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
	if !groupMember(pgid) {
		return false
	}
	return len(scanGroup(pgid, true)) > 0
}

// groupLive returns the live (not zombie) members of process group pgid,
// scanning all of /proc.
func groupLive(pgid int) []int {
	if !groupMember(pgid) {
		return nil
	}
	return scanGroup(pgid, false)
}

// scanGroup lists /proc and asks each process for its group with
// getpgid(2), one system call that formats nothing; only a member's stat
// line is read, for its state. With first it stops at the first live one.
func scanGroup(pgid int, first bool) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var live []int
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if pg, err := syscall.Getpgid(pid); err != nil || pg != pgid {
			continue
		}
		if len(liveAmong(pgid, []int{pid})) == 1 {
			live = append(live, pid)
			if first {
				break
			}
		}
	}
	return live
}

// liveAmong returns those of pids that are still live members of pgid
// (reusing the slice). A pid that was reused by another process is in
// another group and drops out.
func liveAmong(pgid int, pids []int) []int {
	live := pids[:0]
	var buf [statBuf]byte
	for _, pid := range pids {
		stat := readStat(pid, buf[:])
		if state, pg, ok := parseStat(stat); ok && pg == pgid && state != 'Z' && state != 'X' {
			live = append(live, pid)
		}
	}
	return live
}

// descendants returns leader and its descendants, following the children
// of every thread (/proc/PID/task/TID/children). It reads a handful of
// small files for an ordinary tree; a member that left the tree is not
// found here.
func descendants(leader int) []int {
	out := []int{leader}
	for i := 0; i < len(out) && len(out) < 4096; i++ {
		pid := strconv.Itoa(out[i])
		tids, err := os.ReadDir("/proc/" + pid + "/task")
		if err != nil {
			continue
		}
		for _, t := range tids {
			b, err := os.ReadFile("/proc/" + pid + "/task/" + t.Name() + "/children")
			if err != nil {
				continue
			}
			for _, f := range bytes.Fields(b) {
				if c, err := strconv.Atoi(string(f)); err == nil {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// statBuf holds the start of a stat line up to the process group (the
// command name is at most 64 bytes); the rest is not read.
const statBuf = 256

// readStat reads the start of /proc/PID/stat into buf with one open, one
// read and one close; nil when the process is gone.
func readStat(pid int, buf []byte) []byte {
	fd, err := syscall.Open("/proc/"+strconv.Itoa(pid)+"/stat", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	n, err := syscall.Read(fd, buf)
	_ = syscall.Close(fd)
	if err != nil || n <= 0 {
		return nil
	}
	return buf[:n]
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

// eachProc calls fn with every process's pid and the start of its stat
// line (valid only during the call) until fn returns false.
func eachProc(fn func(pid int, stat []byte) bool) {
	d, err := os.Open("/proc")
	if err != nil {
		return
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	var buf [statBuf]byte
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		stat := readStat(pid, buf[:])
		if stat == nil {
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
	// SIGKILL until nothing carries the marker: a killed process is found
	// until it is a zombie (the kill acts when it next runs, which a loaded
	// machine may delay), and one forked meanwhile is found and killed
	// too. Bounded (5 s, or ctx): what is left then is logged.
	killUntil := time.Now().Add(5 * time.Second)
	for len(pids) > 0 && time.Now().Before(killUntil) && ctx.Err() == nil {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(10 * time.Millisecond)
		pids = find()
	}
	if len(pids) > 0 {
		log.Warn("local: processes survived destroy", "sandbox", id, "pids", pids)
	}
}
