package journal

import (
	"bytes"
	"context"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// Start spawns the journaled agent and returns at once. It deliberately
// ignores the caller's context for the agent's life: a caller that goes
// away must not kill the agent (ctx bounds only the spawn call itself).
// The process handle is released: the agent is reached from now on only
// through its journal (Reader, Probe, Kill), by this process or any other.
func Start(ctx context.Context, h sandbox.Handle, spec Spec) error {
	_, err := start(ctx, h, spec)
	return err
}

// StartWatch is Start that also watches the wrapper through the process
// handle the spawn returned: the channel is closed once the handle's Wait
// returned the wrapper's exit code, which tells a Reader (Reader.Exited)
// that the wrapper is gone without a look at the sandbox's processes. It
// is never closed when that cannot be known (the wait failed, or ctx ended
// first): ctx bounds the spawn and the watch, never the agent.
func StartWatch(ctx context.Context, h sandbox.Handle, spec Spec) (<-chan struct{}, error) {
	pr, err := start(ctx, h, spec)
	if err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() {
		if _, err := pr.Wait(ctx); err == nil {
			close(exited)
		}
	}()
	return exited, nil
}

func start(ctx context.Context, h sandbox.Handle, spec Spec) (sandbox.Process, error) {
	if err := ctx.Err(); err != nil {
		return nil, sandbox.Wrap(sandbox.Canceled, "journal.start", spec.Paths.Token, err)
	}
	caps := h.Capabilities()
	stdin := caps.WritableStdin
	spec.OwnProcessTable = spec.OwnProcessTable || caps.OwnProcessTable
	spec = withScriptShell(h, spec)
	var cs sandbox.CgroupSpawner
	cg := "" // the run's cgroup the wrapper is started in (spawnWrapper)
	if !spec.NoCgroup && sandbox.As(h, &cs) {
		if dir, ok := newRunCgroup(spec.Paths.Token); ok {
			cg, spec.born = dir, true
		}
	}
	cmd, err := Command(spec, stdin)
	if err != nil {
		dropRunCgroup(spec.Paths.Token, cg)
		return nil, err
	}
	if len(spec.Stdin) > 0 && !stdin {
		// Only a file can carry it: written before the agent starts.
		res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `mkdir -p "$1" && cat > "$2"`, "corral-stdin", spec.Paths.Dir, spec.Paths.In}, Stdin: bytes.NewReader(spec.Stdin)})
		if err == nil && res.ExitCode != 0 {
			err = sandbox.Errorf(sandbox.Internal, "journal.start", spec.Paths.Token, "writing the agent's stdin file exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
		}
		if err != nil {
			dropRunCgroup(spec.Paths.Token, cg)
			return nil, err
		}
	}
	pr, err := spawnWrapper(ctx, h, cs, spec.Paths.Token, cg, cmd)
	if err != nil {
		return nil, err
	}
	if stdin {
		payload := append([]byte(spec.Nonce+"\n"), spec.Stdin...)
		if _, err := pr.Stdin().Write(payload); err != nil {
			_ = pr.Kill(context.WithoutCancel(ctx), 0)
			return nil, sandbox.Wrap(sandbox.Internal, "journal.start", spec.Paths.Token, err)
		}
		_ = pr.Stdin().Close()
	}
	// The wrapper writes nothing to its own stdout and stderr; drop them.
	for _, r := range []io.Reader{pr.Stdout(), pr.Stderr()} {
		if c, ok := r.(io.Closer); ok {
			_ = c.Close()
		} else {
			go func() { _, _ = io.Copy(io.Discard, r) }()
		}
	}
	return pr, nil
}

// spawnWrapper spawns the wrapper command cmd. With cg (a run cgroup
// newRunCgroup made, cmd built with the flag born) it starts the wrapper
// in that cgroup through the handle's sandbox.CgroupSpawner (the local
// provider), so that the agent, the wrapper's child, is in the run's
// cgroup from its start without the migration (echo 0 > cgroup.procs)
// that waits for an RCU grace period when the host made none lately; the
// cgroup is removed once the wrapper exits (the wrapper removes it itself
// when it had to leave it to kill what the agent left). Where the handle
// refuses (Unimplemented) the cgroup is removed and the same command is
// spawned as usual: the wrapper, not in a cgroup of the born form, makes
// and joins one itself as always.
func spawnWrapper(ctx context.Context, h sandbox.Handle, cs sandbox.CgroupSpawner, tok, cg string, cmd sandbox.Command) (sandbox.Process, error) {
	if cg != "" {
		pr, err := cs.SpawnInCgroup(context.WithoutCancel(ctx), cmd, cg)
		if err == nil {
			go func() {
				if _, err := pr.Wait(context.Background()); err == nil {
					removeCgroup(cg)
				}
			}()
			return pr, nil
		}
		dropRunCgroup(tok, cg)
		if sandbox.CodeOf(err) != sandbox.Unimplemented {
			return nil, err
		}
	}
	return h.Spawn(context.WithoutCancel(ctx), cmd)
}

// withScriptShell returns spec to run under the handle's script shell
// (sandbox.ScriptShell), with the agent's program by its absolute path;
// spec unchanged when the handle has none or the program does not resolve
// (the plain sh then reports a missing program as it always does).
func withScriptShell(h sandbox.Handle, spec Spec) Spec {
	var ss sandbox.ScriptShell
	if len(spec.Shell) > 0 || !sandbox.As(h, &ss) {
		return spec
	}
	shell := ss.ScriptShell()
	if len(shell) == 0 || spec.Agent.Validate() != nil {
		return spec
	}
	argv := spec.Agent.Argv()
	prog := argv[0]
	if !strings.Contains(prog, "/") {
		p, ok := ss.ResolveProgram(prog, spec.Agent.Env)
		if !ok || !strings.HasPrefix(p, "/") {
			return spec
		}
		prog = p
	}
	agent := spec.Agent
	agent.Shell, agent.Args = "", append([]string{prog}, argv[1:]...)
	spec.Agent, spec.Shell = agent, shell
	return spec
}

// Status is what Probe found.
type Status struct {
	Exists  bool // the journal file exists
	Started bool // the wrapper wrote its start line
	Alive   bool // the wrapper process is running
	// Finished: the journal's last line is this run's exit sentinel and
	// the wrapper is gone (a sentinel while the wrapper runs, or one with
	// bytes after it, is not an exit: see the package doc).
	Finished bool
	ExitCode int // when Finished
	Size     int64
}

// probeScript prints "<exists> <size> <alive>" on the first line — alive
// is 1, 0 or "unstarted", read before the size — then the base64 of the
// journal's last $2 bytes. $1 journal.
const probeScript = aliveFn + `cq_j=$1
if [ ! -f "$cq_j" ]; then echo "0 0 0"; exit 0; fi
cj_alive "$cq_j"
case $? in 0) cq_a=1 ;; 1) cq_a=0 ;; *) cq_a=unstarted ;; esac
echo "1 $(cj_size "$cq_j") $cq_a"
tail -c "$2" "$cq_j" | base64
`

// Probe reports whether a run's agent finished and with which code, from
// the journal's tail, and whether its wrapper is still alive. It applies
// the reader's rule for the exit: the sentinel must be the journal's last
// line and the wrapper gone.
func Probe(ctx context.Context, h sandbox.Handle, p Paths, nonce string) (Status, error) {
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", probeScript, "corral-probe", p.Journal, "4096"}})
	if err != nil {
		return Status{}, err
	}
	head, body, _ := strings.Cut(string(res.Stdout), "\n")
	f := strings.Fields(head)
	if res.ExitCode != 0 || len(f) != 3 {
		return Status{}, sandbox.Errorf(sandbox.Internal, "journal.probe", p.Token, "unexpected probe output (exit %d): %q", res.ExitCode, head)
	}
	st := Status{Exists: f[0] == "1"}
	st.Size, _ = strconv.ParseInt(f[1], 10, 64)
	st.Started = f[2] != "unstarted" && st.Exists
	st.Alive = f[2] == "1"
	if !st.Exists {
		return st, nil
	}
	data, err := decodeBase64([]byte(body))
	if err != nil {
		return Status{}, sandbox.Wrap(sandbox.Internal, "journal.probe", p.Token, err)
	}
	if f[2] == "0" {
		st.ExitCode, st.Finished = FindExit(data, nonce)
	}
	return st, nil
}

// killScript kills a run's process scope (see scope.go) while its wrapper
// lives, but not the wrapper, so it still records the agent's exit:
// SIGTERM first, then after $2 seconds freeze and SIGKILL whatever is left,
// verified. $1 journal, $3 the run's token, $4 "own" when the sandbox has a
// process table of its own. The wrapper is found by cj_alive (aliveFn),
// which a rewritten start line cannot fool.
const killScript = `ck_j=$1 ck_grace=$2 ck_tok=$3 ck_own=$4
` + aliveFn + scopeFns + `
cj_alive "$ck_j" || exit 0
ck_w=$cj_wpid
cs_stat /proc/$ck_w/stat || exit 0
ck_t0=$cs_start
ck_cg=
cs_v2root
if [ -n "$cs_root" ]; then
  cs_cgof "$ck_w"
  case ${cs_cgp##*/} in
  "corral-$ck_tok-"[0-9]*)
    # The wrapper was started in the run's cgroup: it is moved out first
    # (to the parent), so the cgroup's kill spares it; where it cannot be,
    # the cgroup is not killed whole (the other rules still apply).
    ck_cg=$cs_root$cs_cgp
    echo "$ck_w" >"${ck_cg%/*}/cgroup.procs" 2>/dev/null
    cs_cgof "$ck_w"
    [ "$cs_root$cs_cgp" = "$ck_cg" ] && ck_cg= ;;
  *)
    ck_cg=$cs_root${cs_cgp%/}/corral-$ck_tok-$ck_w
    [ -d "$ck_cg" ] || ck_cg= ;;
  esac
fi
ck_pre=
[ "$ck_own" = own ] && IFS= read -r ck_pre 2>/dev/null <"$ck_j.pre"
cs_kill "$ck_tok:$ck_w" "$ck_cg" "$ck_own" "$ck_t0" "$ck_w" "$ck_grace" "$ck_pre" || { echo "processes of the run survived SIGKILL:$cs_all" >&2; exit 1; }
exit 0
`

// Kill terminates a run's agent and everything it started, whichever
// process started the run: every process of the run's scope (its cgroup,
// its marker, its process groups and sessions, and where the sandbox has
// its own process table the orphans it left) gets SIGTERM, then after grace
// (default 2s) is frozen and killed. The wrapper survives long enough to
// write the sentinel. A run that already ended is left alone.
func Kill(ctx context.Context, h sandbox.Handle, p Paths, grace time.Duration) error {
	if grace <= 0 {
		grace = 2 * time.Second
	}
	secs := int((grace + time.Second - 1) / time.Second)
	own := ""
	if h.Capabilities().OwnProcessTable {
		own = "own"
	}
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", killScript, "corral-kill", p.Journal, strconv.Itoa(secs), p.Token, own}})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return sandbox.Errorf(sandbox.Internal, "journal.kill", p.Token, "kill exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// removeScript removes the files ($2...) and then the run's empty cgroups
// ($1 the run's token): a wrapper that was SIGKILLed left its
// corral-TOKEN-PID under the cgroup it ran in, which is the one a process
// the handle starts is in. Only names of exactly that form are removed
// (another run's token may begin with this one's), and only empty ones
// (rmdir refuses a cgroup with members).
const removeScript = cgroupFns + `t=$1; shift
rm -rf -- "$@" || exit 1
cs_v2root
[ -n "$cs_root" ] || exit 0
cs_cgof $$
for g in "$cs_root${cs_cgp%/}/corral-$t-"*; do
  case ${g##*/corral-$t-} in ''|*[!0-9]*) continue ;; esac
  [ -d "$g" ] && rmdir "$g" 2>/dev/null
done
exit 0
`

// Remove deletes a run's journal files and its private files directory,
// and the run's cgroup if a killed wrapper left it (empty) behind.
// Where the sandbox's files are the host's (sandbox.HostPather) it removes
// them itself, without a process; a link the agent put in their place is
// removed, never followed.
func Remove(ctx context.Context, h sandbox.Handle, p Paths) error {
	files := []string{p.Journal, p.Journal + ".pre", p.Err, p.In, p.Files}
	if done, err := removeOnHost(ctx, h, p, files); done {
		return err
	}
	res, err := h.Exec(ctx, sandbox.Command{Args: append([]string{"sh", "-c", removeScript, "corral-remove", p.Token}, files...)})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return sandbox.Errorf(sandbox.Internal, "journal.remove", p.Token, "rm exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// SweepResult is what Sweep did.
type SweepResult struct {
	Listed  int      // files in the directory
	Deleted []string // run ids whose journals were deleted
	Kept    []string // run ids kept (not provably finished, or over the limit)
	Skipped []string // file names that are not journals of a decodable run id
}

// Sweep deletes the journals of finished runs in dir (DefaultDir when
// empty), at most maxDeletes runs per call (default 200). finished decides
// per run id, and must say true only for runs it can prove finished (a
// terminal run record); anything it cannot decide, or errs on, is kept, as
// is every file whose name is not a journal of a decodable run id.
func Sweep(ctx context.Context, h sandbox.Handle, dir string, maxDeletes int, finished func(ctx context.Context, runID string) (bool, error)) (SweepResult, error) {
	if dir == "" {
		dir = DefaultDir
	}
	if maxDeletes <= 0 {
		maxDeletes = 200
	}
	var out SweepResult
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `[ -d "$1" ] || exit 0; cd "$1" && ls -1A`, "corral-sweep", dir}})
	if err != nil {
		return out, err
	}
	if res.ExitCode != 0 {
		return out, sandbox.Errorf(sandbox.Internal, "journal.sweep", dir, "listing exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	runs := map[string]bool{}
	for _, name := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		if name == "" {
			continue
		}
		out.Listed++
		tok, ok := strings.CutSuffix(name, ".ndjson")
		if !ok {
			tok, ok = strings.CutSuffix(name, ".ndjson.pre")
		}
		if !ok {
			tok, ok = strings.CutSuffix(name, ".err")
		}
		id, err := DecodeToken(tok)
		if !ok || err != nil {
			out.Skipped = append(out.Skipped, name)
			continue
		}
		runs[id] = true
	}
	ids := make([]string, 0, len(runs))
	for id := range runs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		done, err := finished(ctx, id)
		if err != nil || !done || len(out.Deleted) >= maxDeletes {
			out.Kept = append(out.Kept, id)
			continue
		}
		p, err := PathsFor(dir, id)
		if err == nil {
			err = Remove(ctx, h, p)
		}
		if err != nil {
			out.Kept = append(out.Kept, id)
			continue
		}
		out.Deleted = append(out.Deleted, id)
	}
	return out, nil
}

// ErrTail returns up to n bytes from the end of a run's stderr sidecar, or
// "" when there is none.
func ErrTail(ctx context.Context, h sandbox.Handle, p Paths, n int) (string, error) {
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `[ -f "$1" ] && tail -c "$2" "$1" | base64; exit 0`, "corral-errtail", p.Err, strconv.Itoa(n)}})
	if err != nil {
		return "", err
	}
	b, err := decodeBase64(res.Stdout)
	if err != nil {
		return "", sandbox.Wrap(sandbox.Internal, "journal.errtail", p.Token, err)
	}
	return string(b), nil
}
