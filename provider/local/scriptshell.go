package local

import (
	"bytes"
	"context"
	"debug/elf"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// The local provider's script shell (sandbox.ScriptShell): a statically
// linked BusyBox with its standalone shell, where the host has one. The
// journal wrapper of every run then makes no exec of a dynamically linked
// utility (mkdir, rmdir, grep, tail): on a host that halves a short run's
// overhead (BenchmarkRunStart in run/). Without one, the wrapper runs under
// sh as before.

// ScriptShellAuto, ScriptShellOff are the special values of
// Options.ScriptShell.
const (
	// ScriptShellAuto (the default, "") uses the first "busybox" on the
	// corral process's PATH that qualifies (see Options.ScriptShell).
	ScriptShellAuto = ""
	// ScriptShellOff runs corral's scripts under the host's sh.
	ScriptShellOff = "off"
)

var (
	shellMu    sync.Mutex
	shellCache = map[string]bool{} // busybox path → qualifies
)

// scriptShell returns the BusyBox that opts asks for, or "" for none.
func scriptShell(opt string) string {
	if opt == ScriptShellOff {
		return ""
	}
	path := opt
	if path == ScriptShellAuto {
		p, err := exec.LookPath("busybox")
		if err != nil {
			return ""
		}
		path = p
	}
	path, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	shellMu.Lock()
	defer shellMu.Unlock()
	ok, seen := shellCache[path]
	if !seen {
		ok = qualifies(path)
		shellCache[path] = ok
	}
	if !ok {
		return ""
	}
	return path
}

// qualifies reports whether path is a statically linked ELF program (no
// interpreter: no dynamic loader on every exec) whose "sh" prefers its own
// applets, which `command -v mkdir` shows by printing the bare name.
func qualifies(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	static := true
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			static = false
		}
	}
	f.Close()
	if !static {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "sh", "-c", "command -v mkdir").Output()
	return err == nil && bytes.Equal(out, []byte("mkdir\n"))
}

var _ sandbox.ScriptShell = (*handle)(nil)

// ScriptShell returns [busybox, "sh"] when the provider has a qualifying
// BusyBox (Options.ScriptShell), else nil.
func (h *handle) ScriptShell() []string {
	if h.p.shell == "" {
		return nil
	}
	return []string{h.p.shell, "sh"}
}

// ResolveProgram finds name on the PATH its command would run with (the
// host's environment, the sandbox's and env, merged as for a command).
func (h *handle) ResolveProgram(name string, env map[string]string) (string, bool) {
	p, err := LookPath(name, h.environ(env))
	if err != nil || !filepath.IsAbs(p) {
		return "", false
	}
	return p, true
}
