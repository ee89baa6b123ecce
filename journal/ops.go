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
	if err := ctx.Err(); err != nil {
		return sandbox.Wrap(sandbox.Canceled, "journal.start", spec.Paths.Token, err)
	}
	stdin := h.Capabilities().WritableStdin
	cmd, err := Command(spec, stdin)
	if err != nil {
		return err
	}
	if len(spec.Stdin) > 0 && !stdin {
		// Only a file can carry it: written before the agent starts.
		res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", `mkdir -p "$1" && cat > "$2"`, "corral-stdin", spec.Paths.Dir, spec.Paths.In}, Stdin: bytes.NewReader(spec.Stdin)})
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return sandbox.Errorf(sandbox.Internal, "journal.start", spec.Paths.Token, "writing the agent's stdin file exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
		}
	}
	pr, err := h.Spawn(context.WithoutCancel(ctx), cmd)
	if err != nil {
		return err
	}
	if stdin {
		payload := append([]byte(spec.Nonce+"\n"), spec.Stdin...)
		if _, err := pr.Stdin().Write(payload); err != nil {
			_ = pr.Kill(context.WithoutCancel(ctx), 0)
			return sandbox.Wrap(sandbox.Internal, "journal.start", spec.Paths.Token, err)
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
	return nil
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

// killScript kills the agent's process tree: every descendant of the
// wrapper, but not the wrapper, so it still records the agent's exit.
// SIGTERM first, SIGKILL after $2 seconds for what is left. $1 journal.
const killScript = `ck_j=$1
IFS= read -r ck_l 2>/dev/null <"$ck_j" || exit 0
case "$ck_l" in '{"__start":'*) ;; *) exit 0 ;; esac
ck_p=${ck_l#*:}; ck_p=${ck_p%\}}
kill -0 "$ck_p" 2>/dev/null || exit 0
ck_tree() {
  ck_root=$1 ck_all=" $1 " ck_grew=1
  while [ $ck_grew = 1 ]; do
    ck_grew=0
    for ck_s in /proc/[0-9]*/stat; do
      IFS= read -r ck_st 2>/dev/null <"$ck_s" || continue
      ck_pid=${ck_st%% *}
      ck_rest=${ck_st##*) }
      set -- $ck_rest
      case "$ck_all" in *" $ck_pid "*) continue ;; esac
      case "$ck_all" in *" $2 "*) ck_all="$ck_all$ck_pid " ck_grew=1 ;; esac
    done
  done
  echo "${ck_all# $ck_root }"
}
ck_kids=$(ck_tree "$ck_p")
[ -n "$ck_kids" ] || exit 0
kill -TERM $ck_kids 2>/dev/null
ck_i=0
while [ $ck_i -lt $(($2*10)) ]; do
  ck_live=
  for ck_k in $ck_kids; do
    if [ -r /proc/$ck_k/stat ]; then
      IFS= read -r ck_st 2>/dev/null </proc/$ck_k/stat || continue
      ck_rest=${ck_st##*) }
      case "$ck_rest" in Z*) ;; *) ck_live="$ck_live $ck_k" ;; esac
    fi
  done
  [ -z "$ck_live" ] && exit 0
  sleep 0.1; ck_i=$((ck_i+1))
done
kill -KILL $ck_live 2>/dev/null
echo "killed with SIGKILL:$ck_live" >&2
exit 0
`

// Kill terminates a run's agent, whichever process started it: every
// process below the journal wrapper gets SIGTERM, then SIGKILL after grace
// (default 2s). The wrapper survives long enough to write the sentinel. A
// run that already ended is left alone.
func Kill(ctx context.Context, h sandbox.Handle, p Paths, grace time.Duration) error {
	if grace <= 0 {
		grace = 2 * time.Second
	}
	secs := int((grace + time.Second - 1) / time.Second)
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", killScript, "corral-kill", p.Journal, strconv.Itoa(secs)}})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return sandbox.Errorf(sandbox.Internal, "journal.kill", p.Token, "kill exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}

// Remove deletes a run's journal files and its private files directory.
func Remove(ctx context.Context, h sandbox.Handle, p Paths) error {
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"rm", "-rf", "--", p.Journal, p.Err, p.In, p.Files}})
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
