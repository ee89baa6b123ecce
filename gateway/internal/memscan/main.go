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

// scan reads one process's readable mappings; it returns the bytes read
// and the addresses of confirmed matches.
func scan(pid, n int, want uint64, sha string) (int64, []uint64) {
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return 0, nil
	}
	defer maps.Close()
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
	sc := bufio.NewScanner(maps)
	buf := make([]byte, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[1][0] != 'r' || strings.Contains(sc.Text(), "[vvar") || strings.Contains(sc.Text(), "[vsyscall]") {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		var region []byte
		for off := start; off < end; {
			m := min(uint64(len(buf)), end-off)
			k, err := mem.ReadAt(buf[:m], int64(off))
			region = append(region, buf[:k]...)
			if err != nil || k == 0 {
				break
			}
			off += uint64(k)
		}
		total += int64(len(region))
		for _, at := range match(region, n, want, pow, sha) {
			hits = append(hits, start+uint64(at))
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
