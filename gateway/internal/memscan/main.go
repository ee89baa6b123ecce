// Command memscan looks for a value in the memory of the processes it can
// read, without being given the value: it gets the value's length, its
// Rabin-Karp fingerprint and its SHA-256, slides a rolling hash over every
// readable mapping of /proc/PID/mem and confirms a fingerprint match with
// the SHA-256. The canary tests run it inside a sandbox, so the sandbox
// never holds the value it looks for.
//
//	memscan -len N -rk HEX -sha HEX [-marker NAME=VALUE]
//
// With -marker only processes whose environment holds NAME=VALUE are
// scanned (the agent's own tree on a provider whose sandbox shares the
// host's /proc); without it every process but memscan itself. It prints
// "scanned P processes, B bytes, F found" and a line per hit.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Base is the Rabin-Karp base; fingerprints are mod 2^64.
const Base = 1099511628211

func main() {
	n := flag.Int("len", 0, "the value's length")
	rk := flag.String("rk", "", "its fingerprint (hex)")
	sha := flag.String("sha", "", "its SHA-256 (hex)")
	marker := flag.String("marker", "", "NAME=VALUE: scan only processes with it in their environment")
	flag.Parse()
	want, err := strconv.ParseUint(*rk, 16, 64)
	if err != nil || *n <= 0 || len(*sha) != 64 {
		fmt.Fprintln(os.Stderr, "memscan: want -len, -rk and -sha")
		os.Exit(2)
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		fmt.Fprintln(os.Stderr, "memscan:", err)
		os.Exit(2)
	}
	self := os.Getpid()
	var procs, found int
	var total int64
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if *marker != "" {
			env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
			if err != nil || !bytes.Contains(append([]byte{0}, env...), []byte("\x00"+*marker+"\x00")) {
				continue
			}
		}
		b, hits := scan(pid, *n, want, *sha)
		if b > 0 {
			procs++
			total += b
		}
		for _, h := range hits {
			found++
			fmt.Printf("found in pid %d at %#x\n", pid, h)
		}
	}
	fmt.Printf("scanned %d processes, %d bytes, %d found\n", procs, total, found)
}

// region is one mapping of a process.
type region struct {
	start, end uint64
	rss        int64 // resident kB; 0 means nothing to read
}

// regions lists a process's readable mappings with resident pages, from
// /proc/PID/smaps (address reservations with nothing resident, such as a
// JavaScript engine's gigabytes, are skipped: they read as zeros).
func regions(pid int) []region {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []region
	var cur *region
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "Rss:"); ok {
			if cur != nil {
				cur.rss, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			}
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 || !strings.Contains(fields[0], "-") || strings.HasSuffix(fields[0], ":") {
			continue
		}
		cur = nil
		lo, hi, _ := strings.Cut(fields[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || fields[1][0] != 'r' || strings.Contains(line, "[vvar") || strings.Contains(line, "[vsyscall]") {
			continue
		}
		out = append(out, region{start: start, end: end})
		cur = &out[len(out)-1]
	}
	return out
}

// scan reads one process's readable, resident mappings; it returns the
// bytes read and the addresses of confirmed matches.
func scan(pid, n int, want uint64, sha string) (int64, []uint64) {
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return 0, nil
	}
	defer mem.Close()
	var pow uint64 = 1 // Base^(n-1)
	for i := 1; i < n; i++ {
		pow *= Base
	}
	var total int64
	var hits []uint64
	buf := make([]byte, 1<<20)
	zero := make([]byte, len(buf))
	for _, r := range regions(pid) {
		if r.rss == 0 {
			continue
		}
		// Chunks, each hashed with the n-1 bytes before it, so a value
		// across a chunk boundary is seen; an all-zero chunk cannot hold
		// a value (which has no NUL) and is not hashed.
		var carry []byte
		for off := r.start; off < r.end; {
			m := min(uint64(len(buf)), r.end-off)
			k, err := mem.ReadAt(buf[:m], int64(off))
			if k > 0 {
				total += int64(k)
				if bytes.Equal(buf[:k], zero[:k]) {
					carry = carry[:0]
				} else {
					win := append(carry, buf[:k]...)
					base := off - uint64(len(carry))
					for _, at := range match(win, n, want, pow, sha) {
						hits = append(hits, base+uint64(at))
					}
					keep := min(n-1, len(win))
					carry = append(carry[:0:0], win[len(win)-keep:]...)
				}
			}
			if err != nil || k == 0 {
				break
			}
			off += uint64(k)
		}
	}
	return total, hits
}

// match slides the rolling hash over b.
func match(b []byte, n int, want, pow uint64, sha string) []int {
	if len(b) < n {
		return nil
	}
	var h uint64
	for i := 0; i < n; i++ {
		h = h*Base + uint64(b[i])
	}
	var out []int
	for i := 0; ; i++ {
		if h == want {
			s := sha256.Sum256(b[i : i+n])
			if hex.EncodeToString(s[:]) == sha {
				out = append(out, i)
			}
		}
		if i+n >= len(b) {
			return out
		}
		h = (h-uint64(b[i])*pow)*Base + uint64(b[i+n])
	}
}
