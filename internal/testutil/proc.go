package testutil

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Proc is what the tests read of a process's /proc/PID/stat.
type Proc struct {
	Pid, PPid, Session int
	State              string // "R", "S", "Z" (a zombie), ...
}

// Procs lists the processes in /proc, zombies included.
func Procs() []Proc {
	var out []Proc
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:]) // state ppid pgrp session ...
		if len(f) < 4 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		sid, _ := strconv.Atoi(f[3])
		out = append(out, Proc{Pid: pid, PPid: ppid, Session: sid, State: f[0]})
	}
	return out
}

// SessionProcs lists the live (not zombie) processes of the session sid:
// what a warm keeper, which leads its session, left.
func SessionProcs(sid int) []int {
	var out []int
	for _, p := range Procs() {
		if p.Session == sid && p.State != "Z" {
			out = append(out, p.Pid)
		}
	}
	return out
}

// PidFile is the pid in the one file glob matches (a warm keeper
// directory's pid file); 0 when there is none, several, or no number.
func PidFile(glob string) int {
	files, _ := filepath.Glob(glob)
	if len(files) != 1 {
		return 0
	}
	b, _ := os.ReadFile(files[0])
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// KillGroup SIGKILLs the process group pid leads (a warm keeper, which
// leads its session and group).
func KillGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }

// LogFiles logs the regular files the globs match (up to 3000 bytes each)
// but those skip names: what a failed test leaves to read.
func LogFiles(tb testing.TB, skip func(name string) bool, globs ...string) {
	tb.Helper()
	for _, g := range globs {
		files, _ := filepath.Glob(g)
		for _, f := range files {
			if fi, err := os.Stat(f); err != nil || !fi.Mode().IsRegular() || skip != nil && skip(f) {
				continue
			}
			if b, err := os.ReadFile(f); err == nil {
				tb.Logf("%s:\n%.3000s", f, b)
			}
		}
	}
}
