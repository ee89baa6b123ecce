// Package lean keeps a long-lived corral process small once it has started.
//
// A Go program's start-up runs the init functions of every package linked
// into it; they are spread over the whole executable, and each page fault
// maps a window of pages around it, so a daemon that has only started holds
// about half of its 47 MB binary resident though it will not run that code
// again. Trim hands those clean, file-backed pages back (they stay in the
// page cache, shared, and come back on a minor fault when used) and returns
// the heap that start-up freed. It never touches a written page.
package lean

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Trim releases start-up memory: the executable's read-only mappings (code
// and read-only data) where the platform allows it, and the free heap. It
// returns how many bytes of mappings it advised away (0 where it cannot)
// and never fails the caller: a mapping it cannot parse or advise is left
// as it is.
func Trim() int64 {
	n := trimExecutable()
	debug.FreeOSMemory()
	return n
}

// StatusKB reads a memory field of a process's /proc/PID/status ("VmRSS",
// "RssFile", "RssAnon"), in kB; pid 0 is this process. It is how the
// tests and benchmarks measure what Trim gives back.
func StatusKB(pid int, field string) (int64, error) {
	p := "/proc/self/status"
	if pid != 0 {
		p = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no %s field", p, field)
}
