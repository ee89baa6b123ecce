// Package bootstrap prepares a freshly created sandbox for an agent: it
// clones the workspace source, writes skills and AGENTS.md, detects the
// package manager and runs the setup plan.
//
// Everything goes through the sandbox contract (exec, spawn, file system),
// so it works on every provider. Secrets reach commands only through their
// environment and are redacted from any output quoted in an error.
package bootstrap

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// Options tune Run.
type Options struct {
	// OnStep is told when each setup step starts and ends.
	OnStep func(StepEvent)
	// SetupTimeout bounds the whole setup plan. Default 30 minutes.
	SetupTimeout time.Duration
}

// StepEvent reports progress of one setup step.
type StepEvent struct {
	Index    int           // 1-based position in the flattened plan
	Total    int           // number of commands in the plan
	Command  string        // the command (shell text written by the workspace author)
	Parallel bool          // part of a parallel group
	Done     bool          // false when starting, true when finished
	ExitCode int           // when Done
	Elapsed  time.Duration // when Done
}

// Result is what Run did.
type Result struct {
	Cloned         bool     // the source was cloned in the sandbox
	PackageManager string   // npm, pnpm, yarn, bun, or empty
	Skills         []string // portable paths of discovered skill directories
	StepsRun       int      // setup commands that ran
}

// Run bootstraps h with ws. A nil workspace does nothing. Run applies the
// workspace secrets to the handle's environment first.
func Run(ctx context.Context, h sandbox.Handle, ws *sandbox.Workspace, opts Options) (Result, error) {
	var res Result
	if ws == nil {
		return res, nil
	}
	if ws.Secrets.Len() > 0 {
		if err := h.SetEnv(ctx, ws.Secrets.Env()); err != nil {
			return res, err
		}
	}
	if c, ok := SourceClone(ws); ok {
		has, err := h.FS().Exists(ctx, ".git")
		if err != nil {
			return res, err
		}
		if !has {
			if CloneOnHostFor(ws.Source) {
				return res, sandbox.Errorf(sandbox.FailedPrecondition, "bootstrap", c.URL,
					"the source is cloned on the host and must be given to create as SourceDir (see Prepare)")
			}
			c.Dir = sandbox.WorkspaceRoot
			if err := CloneInSandbox(ctx, h, c, ws.Secrets); err != nil {
				return res, err
			}
			res.Cloned = true
		}
	}
	skills, err := installSkills(ctx, h, ws)
	if err != nil {
		return res, err
	}
	res.Skills = skills
	if err := writeAgents(ctx, h, ws); err != nil {
		return res, err
	}
	res.PackageManager = DetectPackageManager(ctx, h.FS())
	n, err := runSetup(ctx, h, ws, opts)
	res.StepsRun = n
	return res, err
}

// Prepared is the host-side part of a bootstrap: a directory to hand to
// Provider.Create as CreateOptions.SourceDir.
type Prepared struct {
	SourceDir string
	cleanup   func()
}

// Cleanup removes what Prepare made on the host.
func (p Prepared) Cleanup() {
	if p.cleanup != nil {
		p.cleanup()
	}
}

// Prepare does the host-side work of a bootstrap before the sandbox exists:
// a local directory source is handed over as is, and a git source that is
// cloned on the host (file:// URLs and local paths, or cloneOn: host) is
// cloned into a temporary directory.
func Prepare(ctx context.Context, ws *sandbox.Workspace) (Prepared, error) {
	if ws == nil || ws.Source == nil {
		return Prepared{}, nil
	}
	if ws.Source.Dir != "" {
		fi, err := os.Stat(ws.Source.Dir)
		if err != nil || !fi.IsDir() {
			return Prepared{}, sandbox.Errorf(sandbox.InvalidArgument, "bootstrap", ws.Source.Dir, "source dir is not an existing directory")
		}
		return Prepared{SourceDir: ws.Source.Dir}, nil
	}
	c, ok := SourceClone(ws)
	if !ok || !CloneOnHostFor(ws.Source) {
		return Prepared{}, nil
	}
	dir, err := CloneOnHost(ctx, c, ws.Secrets)
	if err != nil {
		return Prepared{}, err
	}
	return Prepared{SourceDir: dir, cleanup: func() { os.RemoveAll(filepath.Dir(dir)) }}, nil
}

// writeAgents writes AGENTS.md and links CLAUDE.md and GEMINI.md to it
// (copies where links fail), then every other file skill.
func writeAgents(ctx context.Context, h sandbox.Handle, ws *sandbox.Workspace) error {
	fs := h.FS()
	doc := ws.AgentsDocument()
	if doc != "" {
		if err := fs.WriteFile(ctx, "AGENTS.md", []byte(doc)); err != nil {
			return err
		}
		for _, name := range []string{"CLAUDE.md", "GEMINI.md"} {
			res, err := h.Exec(ctx, sandbox.Command{Args: []string{"ln", "-sf", "AGENTS.md", name}})
			if err == nil && res.ExitCode == 0 {
				continue
			}
			if err := fs.WriteFile(ctx, name, []byte(doc)); err != nil {
				return err
			}
		}
	}
	for _, sk := range ws.Skills {
		if sk.Path == "" {
			continue
		}
		if rel, _ := sandbox.CleanPath(sk.Path); rel == "AGENTS.md" && doc != "" {
			continue // already part of AGENTS.md
		}
		if err := fs.WriteFile(ctx, sk.Path, []byte(sk.Content)); err != nil {
			return err
		}
	}
	return nil
}

// installSkills clones git skill packs (on the host for host URLs, then
// copied in) and returns the discovered skill directories.
func installSkills(ctx context.Context, h sandbox.Handle, ws *sandbox.Workspace) ([]string, error) {
	var found []string
	for _, sk := range ws.Skills {
		if sk.Git == "" {
			continue
		}
		rel, err := sandbox.CleanPath(sk.PackDir())
		if err != nil {
			return nil, err
		}
		c := Clone{URL: sandbox.GitURL(sk.Git)}
		if sk.TokenSecret != "" {
			c.Token, _ = ws.Secrets.Value(sk.TokenSecret)
		}
		if exists, err := h.FS().Exists(ctx, rel); err != nil {
			return nil, err
		} else if !exists {
			if sandbox.IsHostGitURL(c.URL) {
				dir, err := CloneOnHost(ctx, c, ws.Secrets)
				if err != nil {
					return nil, err
				}
				err = upload(ctx, h.FS(), dir, rel)
				os.RemoveAll(filepath.Dir(dir))
				if err != nil {
					return nil, err
				}
			} else {
				c.Dir = rel
				if err := CloneInSandbox(ctx, h, c, ws.Secrets); err != nil {
					return nil, err
				}
			}
		}
		dirs, err := DiscoverSkills(ctx, h.FS(), rel)
		if err != nil {
			return nil, err
		}
		found = append(found, dirs...)
	}
	return found, nil
}

// upload copies a host directory tree into the sandbox under rel, leaving
// out .git.
func upload(ctx context.Context, fs sandbox.FS, hostDir, rel string) error {
	return filepath.WalkDir(hostDir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(hostDir, p)
		switch {
		case d.IsDir() && d.Name() == ".git":
			return filepath.SkipDir
		case d.IsDir():
			return fs.MkdirAll(ctx, path.Join(rel, filepath.ToSlash(r)))
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return fs.WriteFile(ctx, path.Join(rel, filepath.ToSlash(r)), b)
		}
		return nil
	})
}

// DiscoverSkills returns the directories under dir (to depth 6, skipping
// dot directories and node_modules) that hold a SKILL.md (any case). When
// none does, dir itself is the skill.
func DiscoverSkills(ctx context.Context, fs sandbox.FS, dir string) ([]string, error) {
	var found []string
	var walk func(d string, depth int) error
	walk = func(d string, depth int) error {
		ents, err := fs.ReadDir(ctx, d)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if e.Type == sandbox.TypeFile && strings.EqualFold(e.Name, "SKILL.md") {
				found = append(found, sandbox.PortablePath(mustClean(d)))
				break
			}
		}
		if depth >= 6 {
			return nil
		}
		for _, e := range ents {
			if e.Type == sandbox.TypeDir && !strings.HasPrefix(e.Name, ".") && e.Name != "node_modules" {
				if err := walk(path.Join(d, e.Name), depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(dir, 0); err != nil {
		return nil, err
	}
	if len(found) == 0 {
		found = []string{sandbox.PortablePath(mustClean(dir))}
	}
	return found, nil
}

func mustClean(p string) string {
	rel, err := sandbox.CleanPath(p)
	if err != nil {
		return p
	}
	return rel
}

// DetectPackageManager reports the package manager whose lockfile is at the
// workspace root (pnpm, yarn, bun, npm, in that order), or "". Nothing is
// installed.
func DetectPackageManager(ctx context.Context, fs sandbox.FS) string {
	for _, lf := range []struct{ file, pm string }{
		{"pnpm-lock.yaml", "pnpm"}, {"yarn.lock", "yarn"}, {"bun.lockb", "bun"}, {"bun.lock", "bun"}, {"package-lock.json", "npm"},
	} {
		if ok, _ := fs.Exists(ctx, lf.file); ok {
			return lf.pm
		}
	}
	return ""
}

// setupScript runs a setup plan given as positional parameters: "s CMD"
// for a serial step, "p N CMD1 … CMDN" for a parallel group. Serial steps
// are eval'ed in this shell, so cd and export carry over; parallel commands
// run in subshells of it. Each command's output goes to a temporary file;
// progress goes to stdout as lines starting with \036 (RS), and a failed
// step's output tail follows its end line. The plan is stored before any
// step runs, so a step that changes the positional parameters changes
// nothing, and every name the script uses starts with __corral_. A serial
// step that exits the shell is still reported, with its output, by the
// EXIT trap (markers go to fd 7, the script's own stdout).
const setupScript = `__corral_n=0
while [ $# -gt 0 ]; do
  __corral_n=$((__corral_n+1)); eval "__corral_k_$__corral_n=\$1"; shift
  if eval "[ \"\$__corral_k_$__corral_n\" = p ]"; then
    eval "__corral_c_$__corral_n=\$1"; shift
    eval "__corral_m=\$__corral_c_$__corral_n"
    __corral_j=0
    while [ $__corral_j -lt $__corral_m ]; do
      __corral_j=$((__corral_j+1)); eval "__corral_s_${__corral_n}_$__corral_j=\$1"; shift
    done
  else
    eval "__corral_s_${__corral_n}_1=\$1"; shift
  fi
done
__corral_log=$(mktemp) || exit 125
exec 7>&1
__corral_running=
__corral_exit() {
  __corral_rc=$?
  if [ -n "$__corral_running" ]; then
    printf '\036end %d %d\n' "$__corral_no" "$__corral_rc" >&7
    tail -c 1500 "$__corral_log" >&7
  fi
  rm -f "$__corral_log"
}
trap __corral_exit EXIT
__corral_i=0 __corral_no=0
while [ $__corral_i -lt $__corral_n ]; do
  __corral_i=$((__corral_i+1))
  eval "__corral_k=\$__corral_k_$__corral_i"
  if [ "$__corral_k" = s ]; then
    __corral_no=$((__corral_no+1))
    printf '\036start %d\n' "$__corral_no"
    eval "__corral_cmd=\$__corral_s_${__corral_i}_1"
    __corral_running=1
    { eval "$__corral_cmd"; } >"$__corral_log" 2>&1 </dev/null
    __corral_rc=$?
    __corral_running=
    set +e
    trap __corral_exit EXIT
    printf '\036end %d %d\n' "$__corral_no" "$__corral_rc"
    if [ "$__corral_rc" -ne 0 ]; then tail -c 1500 "$__corral_log"; exit 0; fi
  else
    eval "__corral_m=\$__corral_c_$__corral_i"
    __corral_j=0
    while [ $__corral_j -lt $__corral_m ]; do
      __corral_j=$((__corral_j+1))
      printf '\036start %d\n' "$((__corral_no+__corral_j))"
      eval "__corral_cmd=\$__corral_s_${__corral_i}_$__corral_j"
      ( eval "$__corral_cmd" ) >"$__corral_log.$__corral_j" 2>&1 </dev/null &
      eval "__corral_pid_$__corral_j=\$!"
    done
    __corral_j=0 __corral_fail=0
    while [ $__corral_j -lt $__corral_m ]; do
      __corral_j=$((__corral_j+1))
      eval "wait \$__corral_pid_$__corral_j"
      eval "__corral_rc_$__corral_j=\$?"
    done
    __corral_j=0
    while [ $__corral_j -lt $__corral_m ]; do
      __corral_j=$((__corral_j+1))
      eval "__corral_rc=\$__corral_rc_$__corral_j"
      printf '\036end %d %d\n' "$((__corral_no+__corral_j))" "$__corral_rc"
      if [ "$__corral_rc" -ne 0 ] && [ $__corral_fail = 0 ]; then __corral_fail=$__corral_j; fi
    done
    if [ $__corral_fail != 0 ]; then tail -c 1500 "$__corral_log.$__corral_fail"; rm -f "$__corral_log".*; exit 0; fi
    rm -f "$__corral_log".*
    __corral_no=$((__corral_no+__corral_m))
  fi
done
printf '\036done\n'
`

type flatStep struct {
	cmd      string
	parallel bool
}

// runSetup runs the plan as one spawned shell and reports progress.
func runSetup(ctx context.Context, h sandbox.Handle, ws *sandbox.Workspace, opts Options) (int, error) {
	if len(ws.Setup) == 0 {
		return 0, nil
	}
	args := []string{"sh", "-c", setupScript, "corral-setup"}
	var flat []flatStep
	for _, st := range ws.Setup {
		if st.Run != "" {
			args = append(args, "s", st.Run)
			flat = append(flat, flatStep{cmd: st.Run})
			continue
		}
		args = append(args, "p", strconv.Itoa(len(st.Parallel)))
		for _, c := range st.Parallel {
			args = append(args, c)
			flat = append(flat, flatStep{cmd: c, parallel: true})
		}
	}
	timeout := opts.SetupTimeout
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pr, err := h.Spawn(ctx, sandbox.Command{Args: args})
	if err != nil {
		return 0, err
	}
	go func() { _, _ = io.Copy(io.Discard, pr.Stderr()) }()
	started := map[int]time.Time{}
	ran := 0
	var failed *StepEvent
	var tailBuf strings.Builder
	done := false
	sc := bufio.NewScanner(pr.Stdout())
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if failed != nil {
			if !strings.HasPrefix(line, "\036") {
				tailBuf.WriteString(line + "\n")
			}
			continue
		}
		msg, ok := strings.CutPrefix(line, "\036")
		if !ok {
			continue
		}
		f := strings.Fields(msg)
		switch {
		case len(f) == 2 && f[0] == "start":
			i, _ := strconv.Atoi(f[1])
			if i < 1 || i > len(flat) {
				continue
			}
			started[i] = time.Now()
			report(opts, StepEvent{Index: i, Total: len(flat), Command: flat[i-1].cmd, Parallel: flat[i-1].parallel})
		case len(f) == 3 && f[0] == "end":
			i, _ := strconv.Atoi(f[1])
			rc, _ := strconv.Atoi(f[2])
			if i < 1 || i > len(flat) {
				continue
			}
			ran++
			ev := StepEvent{Index: i, Total: len(flat), Command: flat[i-1].cmd, Parallel: flat[i-1].parallel, Done: true, ExitCode: rc, Elapsed: time.Since(started[i])}
			report(opts, ev)
			if rc != 0 && failed == nil {
				failed = &ev
			}
		case len(f) == 1 && f[0] == "done":
			done = true
		}
	}
	code, werr := pr.Wait(context.WithoutCancel(ctx))
	switch {
	case ctx.Err() != nil:
		return ran, sandbox.Wrap(sandbox.DeadlineExceeded, "setup", "", ctx.Err())
	case werr != nil:
		return ran, werr
	case failed != nil:
		return ran, &SetupError{Command: failed.Command, ExitCode: failed.ExitCode, Output: ws.Secrets.Redact(tail(tailBuf.String(), 1500))}
	case !done:
		// A step ended the shell itself (exit, or set -e): blame the step
		// that started last.
		last := ""
		for i := len(flat); i >= 1; i-- {
			if _, ok := started[i]; ok {
				last = flat[i-1].cmd
				break
			}
		}
		return ran, &SetupError{Command: last, ExitCode: code, Output: "(the step ended the setup shell)"}
	}
	return ran, nil
}

func report(opts Options, ev StepEvent) {
	if opts.OnStep != nil {
		opts.OnStep(ev)
	}
}

// SetupError is a failed setup step. Its code is FailedPrecondition.
type SetupError struct {
	Command  string // the step's command
	ExitCode int    // its exit code
	Output   string // the tail (≤ 1500 characters) of its output, secrets redacted
}

func (e *SetupError) Error() string {
	msg := fmt.Sprintf("setup step failed: %s (exit %d)", e.Command, e.ExitCode)
	if e.Output != "" {
		msg += "\n" + e.Output
	}
	return msg
}

// ErrorCode returns FailedPrecondition.
func (e *SetupError) ErrorCode() sandbox.Code { return sandbox.FailedPrecondition }

// AsSetupError returns the SetupError in err's chain.
func AsSetupError(err error) (*SetupError, bool) {
	var se *SetupError
	ok := errors.As(err, &se)
	return se, ok
}
