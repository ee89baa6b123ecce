package testutil

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// SessionProcs lists the live (not zombie) processes of the session sid,
// read from /proc: what a warm keeper, which leads its session, left.
func SessionProcs(sid int) []int {
	var out []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:]) // state ppid pgrp session ...
		if len(fields) > 3 && fields[0] != "Z" && fields[3] == strconv.Itoa(sid) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			out = append(out, pid)
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
