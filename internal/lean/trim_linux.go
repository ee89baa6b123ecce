//go:build linux

package lean

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// trimExecutable advises MADV_DONTNEED over the executable's private
// read-only mappings (r-xp, r--p) as /proc/self/smaps lists them. For a
// private mapping never written, the kernel drops the process's page table
// entries and the pages refault from the page cache, unchanged. A mapping
// with any anonymous (copied-on-write) page is skipped: a relocated
// read-only segment (RELRO in a position-independent build) holds data
// the file does not, which dropping would lose.
func trimExecutable() int64 {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &st); err != nil {
		return 0
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0
	}
	defer f.Close()
	var (
		advised    int64
		start, end uintptr
		candidate  bool
		written    bool
	)
	flush := func() {
		if candidate && !written {
			if _, _, e := unix.Syscall(unix.SYS_MADVISE, start, end-start, unix.MADV_DONTNEED); e == 0 {
				advised += int64(end - start)
			}
		}
		candidate, written = false, false
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if s, e, ok, header := readOnlyMapping(line, st.Ino); header {
			flush()
			start, end, candidate = s, e, ok
			continue
		}
		if candidate && strings.HasPrefix(line, "Anonymous:") && strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(line, "Anonymous:"), "kB")) != "0" {
			written = true
		}
	}
	if sc.Err() != nil {
		return advised // the last mapping's record may be incomplete: leave it
	}
	flush()
	return advised
}

// readOnlyMapping parses a line of /proc/self/smaps. header is true for a
// mapping's first line ("address perms offset dev inode [path]"); ok is
// true when that mapping is a private, read-only mapping of the file with
// inode ino, whose range is [start, end).
func readOnlyMapping(line string, ino uint64) (start, end uintptr, ok, header bool) {
	fields := strings.Fields(line)
	if len(fields) < 5 || strings.HasSuffix(fields[0], ":") {
		return 0, 0, false, false
	}
	lo, hi, found := strings.Cut(fields[0], "-")
	if !found {
		return 0, 0, false, false
	}
	s, err1 := strconv.ParseUint(lo, 16, 64)
	e, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || e <= s {
		return 0, 0, false, false
	}
	if perms := fields[1]; perms != "r-xp" && perms != "r--p" {
		return 0, 0, false, true
	}
	if n, err := strconv.ParseUint(fields[4], 10, 64); err != nil || n != ino || n == 0 || len(fields) < 6 {
		return 0, 0, false, true
	}
	return uintptr(s), uintptr(e), true, true
}
