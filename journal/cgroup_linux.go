//go:build linux

package journal

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// removeRunCgroups removes the empty cgroups corral-TOKEN-PID that a
// SIGKILLed wrapper of the run left under this process's cgroup v2 (the
// one a wrapper this process started ran in), as removeScript does in a
// sandbox: names of exactly that form only, and rmdir refuses a cgroup
// that still has members. Errors are ignored: this is hygiene, not a
// guarantee.
//
// A cgroup this process made for the run (newRunCgroup) is removed by
// name, without the listing: the directory holds every concurrent run's
// cgroup, and listing it on every run's end costs the daemon time in
// proportion to the runs in flight.
func removeRunCgroups(tok string) {
	if dir, ok := bornCgroups.take(tok); ok {
		_ = os.Remove(dir) // busy while the wrapper is still in it: spawnWrapper removes it once it exits
		return
	}
	root := cgroupV2Root()
	if root == "" {
		return
	}
	own := ownCgroup()
	if own == "" {
		return
	}
	dir := filepath.Join(root, own)
	prefix := "corral-" + tok + "-"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, prefix) || !allDigits(name[len(prefix):]) {
			continue
		}
		_ = os.Remove(filepath.Join(dir, name))
	}
}

// cgroupV2Root returns the cgroup v2 mount: the usual places first
// (unified, then hybrid), then the mount table; "" without one.
func cgroupV2Root() string {
	for _, r := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if _, err := os.Stat(filepath.Join(r, "cgroup.controllers")); err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(r, "..", "cgroup.controllers")); err == nil {
			continue
		}
		return r
	}
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) >= 3 && fs[2] == "cgroup2" {
			return fs[1]
		}
	}
	return ""
}

// ownCgroup returns this process's cgroup v2 path ("0::PATH"), "" when
// it has none.
func ownCgroup() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			return p
		}
	}
	return ""
}

// allDigits reports whether s is a non-empty string of ASCII digits.
func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// newRunCgroup makes the cgroup a run's wrapper is started in
// (spawnWrapper): corral-TOKEN-N beside this process's own cgroup v2 (the
// form removeRunCgroups and the sandbox's removeScript sweep), N random
// digits, as the wrapper would make corral-TOKEN-PID there. ok false where
// there is no cgroup v2 or no right to make one.
func newRunCgroup(tok string) (string, bool) {
	root, own := cgroupV2Root(), ownCgroup()
	if root == "" || own == "" {
		return "", false
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", false
	}
	n := binary.BigEndian.Uint64(b[:])%900000000 + 100000000 // nine digits, never a leading zero
	dir := filepath.Join(root, own, "corral-"+tok+"-"+strconv.FormatUint(n, 10))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", false
	}
	bornCgroups.put(tok, dir)
	return dir, true
}

// bornCgroups are the run cgroups this process made, by run token, until
// the run's Remove. Bounded: past maxBorn entries (runs whose Remove came
// from another process) it starts again empty, and a Remove that finds no
// entry lists the directory as before.
var bornCgroups = &bornSet{m: map[string]string{}}

const maxBorn = 4096

type bornSet struct {
	mu sync.Mutex
	m  map[string]string
}

func (b *bornSet) put(tok, dir string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.m) >= maxBorn {
		clear(b.m)
	}
	b.m[tok] = dir
}

func (b *bornSet) take(tok string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	dir, ok := b.m[tok]
	delete(b.m, tok)
	return dir, ok
}

// dropRunCgroup removes the cgroup newRunCgroup made for run token tok
// when no wrapper ran in it (its start failed, or the handle spawned the
// wrapper elsewhere, which then makes corral-TOKEN-PID itself), and
// forgets it, so the run's Remove lists the directory as before.
func dropRunCgroup(tok, dir string) {
	removeCgroup(dir)
	bornCgroups.take(tok)
}

// removeCgroup removes a run's cgroup ("" is none); one that still has
// members (the run kept its background processes) stays for the sweep.
func removeCgroup(dir string) {
	if dir != "" {
		_ = os.Remove(dir)
	}
}
