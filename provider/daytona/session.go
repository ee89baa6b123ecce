package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// maxIdleSessions bounds the sessions a handle keeps for reuse.
const maxIdleSessions = 4

// ticketBase is where the stand-in pids of aborted synchronous commands
// start (far above any real pid).
const ticketBase = 1 << 40

// pooled is a session the handle reuses: its shell holds env (the
// command environment it sourced once, as "K=V\x00…"), and it runs one
// command at a time.
type pooled struct {
	id  string
	env string
}

// sessions is a handle's session pool.
type sessions struct {
	mu      sync.Mutex
	idle    []*pooled
	tickets map[int]ticket
	next    atomic.Int64
}

// ticket names an aborted synchronous command: its session's pid file
// and the token its launcher writes there with its pid.
type ticket struct{ pidFile, token string }

// syncLauncher runs a synchronous command: $1 is the pid file, where it
// writes $2 (the command's token) and its pid, for a kill of a command
// whose caller gave up before the answer; $3 is the stdin ("n" or a
// directory of parts, as in launcher), $4 the working directory and $5
// the workspace root, made when it is missing.
const syncLauncher = `pf=$1 t=$2 i=$3 d=$4 r=$5; shift 5
{ printf '%s %s\n' "$t" "$$" >"$pf"; } 2>/dev/null || { mkdir -p "${pf%/*}" && printf '%s %s\n' "$t" "$$" >"$pf"; }
[ -d "$r" ] || mkdir -p "$r"
case $i in n) exec </dev/null;; *) cat "$i"/* >"$i.all" && rm -rf "$i" && exec <"$i.all"; rm -f "$i.all";; esac
cd "$d" || exit 126
exec "$@"`

// pidScript prints the pid the launcher wrote in $1 next to token $2,
// waiting up to five seconds for it; 0 when it never came.
const pidScript = `i=0
while [ "$i" -lt 100 ]; do
  if read -r t p <"$1" 2>/dev/null && [ "$t" = "$2" ]; then echo "$p"; exit 0; fi
  sleep 0.05; i=$((i+1))
done
echo 0`

// acquire takes an idle session whose shell holds env, else makes one
// (POST /process/session); fresh reports a new session, whose shell must
// source env first.
func (h *handle) acquire(ctx context.Context, op, env string) (*pooled, bool, error) {
	h.pool.mu.Lock()
	for i, s := range h.pool.idle {
		if s.env == env {
			h.pool.idle = append(h.pool.idle[:i], h.pool.idle[i+1:]...)
			h.pool.mu.Unlock()
			return s, false, nil
		}
	}
	h.pool.mu.Unlock()
	s := &pooled{id: "corral-" + randomHex(8), env: env}
	if _, err := h.tb.Do(ctx, cloudhttp.Request{Op: op, ID: h.sb.ID, Method: http.MethodPost, Path: "/process/session",
		JSON: map[string]string{"sessionId": s.id}}, nil); err != nil {
		return nil, false, goneErr(op, h.sb.ID, err)
	}
	return s, true, nil
}

// release gives a session whose command ended back to the pool; beyond
// maxIdleSessions, or with an environment that is no longer the
// handle's, it is deleted.
func (h *handle) release(s *pooled) {
	h.pool.mu.Lock()
	keep := len(h.pool.idle) < maxIdleSessions
	if keep {
		h.pool.idle = append(h.pool.idle, s)
	}
	h.pool.mu.Unlock()
	if !keep {
		go h.deleteSession(s.id)
	}
}

// deleteSession removes a session in the background of a bounded context.
func (h *handle) deleteSession(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = h.tb.Do(ctx, cloudhttp.Request{Op: Name + ".exec", ID: h.sb.ID, Method: http.MethodDelete, Path: "/process/session/" + id}, nil)
}

// kill is the Runner's kill strategy: execproc's group kill, after the
// stand-in pid of an aborted synchronous command was resolved to the
// real one through its pid file.
func (h *handle) kill(ctx context.Context, pid int, sig syscall.Signal, grace time.Duration) error {
	if pid >= ticketBase {
		h.pool.mu.Lock()
		t, ok := h.pool.tickets[pid]
		delete(h.pool.tickets, pid)
		h.pool.mu.Unlock()
		if !ok {
			return nil
		}
		res, err := h.run.Run(ctx, Name+".kill", []string{"sh", "-c", pidScript, "sh", t.pidFile, t.token}, nil, "")
		if err != nil {
			return err
		}
		if pid, _ = strconv.Atoi(strings.TrimSpace(string(res.Stdout))); pid <= 0 {
			return nil
		}
	}
	return h.run.GroupKill(ctx, pid, sig, grace)
}

// syncStream is one command run with the synchronous session exec
// (runAsync false) on a pooled session: one request, whose answer holds
// the exit code and the labelled log. It serves Exec and the provider's
// own commands (the file system, kills); Spawn streams (stream).
type syncStream struct {
	h    *handle
	op   string
	spec execproc.Spec
	ctx  context.Context

	pmu     sync.Mutex
	pending bytes.Buffer

	started  chan struct{}
	startErr error
	once     sync.Once

	done   chan struct{}
	res    execAnswer
	resErr error

	closed    chan struct{}
	closeOnce sync.Once
	cancel    context.CancelFunc

	sess    *pooled
	token   string
	ticketd bool
}

// execAnswer is the synchronous exec's answer (SessionExecuteResponse):
// output is the labelled log when the request asked for split output;
// stdout and stderr come apart only for an SDK client from 0.167.0.
type execAnswer struct {
	CmdID    string  `json:"cmdId"`
	Output   *string `json:"output"`
	Stdout   *string `json:"stdout"`
	Stderr   *string `json:"stderr"`
	ExitCode *int    `json:"exitCode"`
}

func (h *handle) startSync(ctx context.Context, op string, spec execproc.Spec) (execproc.Stream, error) {
	s := &syncStream{h: h, op: op, spec: spec, ctx: ctx, started: make(chan struct{}), done: make(chan struct{}),
		closed: make(chan struct{}), token: randomHex(6)}
	if spec.Stdin {
		return s, nil // launched by CloseStdin
	}
	if err := s.launch(nil); err != nil {
		return nil, err
	}
	return s, nil
}

// launch uploads what the command needs (a fresh session's env file,
// the stdin parts), then sends the command in the background.
func (s *syncStream) launch(stdin []byte) (err error) {
	defer func() {
		s.startErr = err
		s.once.Do(func() { close(s.started) })
	}()
	h, ctx, op := s.h, s.ctx, s.op
	env := strings.Join(s.spec.Env, "\x00")
	sess, fresh, err := h.acquire(ctx, op, env)
	if err != nil {
		return err
	}
	s.sess = sess
	tmp := path.Join(path.Dir(h.root), ".corral")
	files := map[string][]byte{}
	prefix := ""
	if fresh && len(s.spec.Env) > 0 {
		// Sourced by the session's shell and removed at once: the values
		// live in that shell's memory, never in the command text.
		var b strings.Builder
		for _, kv := range s.spec.Env {
			k, v, _ := strings.Cut(kv, "=")
			fmt.Fprintf(&b, "export %s=%s\n", k, sandbox.ShellQuote(v))
		}
		f := path.Join(tmp, sess.id+".env")
		files[f] = []byte(b.String())
		prefix = ". " + sandbox.ShellQuote(f) + "; rm -f " + sandbox.ShellQuote(f) + "; "
	}
	inArg := "n"
	if stdin != nil {
		inArg = path.Join(tmp, randomHex(8)+".in")
		for i := 0; i == 0 || len(stdin) > 0; i++ {
			n := min(len(stdin), uploadPart)
			files[fmt.Sprintf("%s/%06d", inArg, i)] = stdin[:n]
			stdin = stdin[n:]
			if len(stdin) > 0 {
				if err := h.upload(ctx, op, files); err != nil {
					h.release(sess)
					return err
				}
				files = map[string][]byte{}
			}
		}
	}
	if len(files) > 0 {
		if err := h.upload(ctx, op, files); err != nil {
			if fresh {
				go h.deleteSession(sess.id)
			} else {
				h.release(sess)
			}
			return err
		}
	}
	dir := s.spec.Dir
	if dir == "" {
		dir = h.root
	}
	argv := append([]string{"setsid", "sh", "-c", syncLauncher, "sh", path.Join(tmp, sess.id+".pid"), s.token, inArg, dir, h.root}, s.spec.Argv...)
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = sandbox.ShellQuote(a)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	hdr := http.Header{}
	hdr.Set("X-Daytona-Split-Output", "true")
	req := cloudhttp.Request{Op: op, ID: h.sb.ID, Method: http.MethodPost, Path: "/process/session/" + sess.id + "/exec",
		Header: hdr, JSON: SessionExecuteRequest{Command: prefix + strings.Join(quoted, " ")}}
	go func() {
		defer cancel()
		// Stream, not Do: the answer carries the whole log, which has no
		// bound of Do's (64 MiB).
		resp, err := h.tb.Stream(rctx, req)
		if err == nil {
			if derr := json.NewDecoder(resp.Body).Decode(&s.res); derr != nil {
				err = sandbox.Errorf(sandbox.Unavailable, op, h.sb.ID, "reading daytona's answer to a command: %v", derr)
			}
			resp.Body.Close()
		}
		if err == nil && s.res.ExitCode == nil {
			err = sandbox.Errorf(sandbox.Internal, op, h.sb.ID, "daytona's answer to command %s has no exit code", s.res.CmdID)
		}
		if err != nil {
			s.resErr = goneErr(op, h.sb.ID, err)
			go h.deleteSession(sess.id)
		} else {
			h.release(sess)
		}
		close(s.done)
	}()
	return nil
}

// Copy waits for the answer and writes its streams. Once the command's
// context ends first, it reports a stand-in pid so that execproc's kill
// can run (resolved through the session's pid file), then waits on.
func (s *syncStream) Copy(stdout, stderr io.Writer) error {
	<-s.started
	if s.startErr != nil {
		return s.startErr
	}
	select {
	case <-s.done:
	case <-s.closed:
		return nil
	case <-s.ctx.Done():
		n := int(ticketBase + s.h.pool.next.Add(1))
		s.h.pool.mu.Lock()
		if s.h.pool.tickets == nil {
			s.h.pool.tickets = map[int]ticket{}
		}
		s.h.pool.tickets[n] = ticket{pidFile: path.Join(path.Dir(s.h.root), ".corral", s.sess.id+".pid"), token: s.token}
		s.h.pool.mu.Unlock()
		s.ticketd = true
		if _, err := fmt.Fprintf(stderr, "P%d\n", n); err != nil {
			return err
		}
		select {
		case <-s.done:
		case <-s.closed:
			return nil
		}
	}
	if s.resErr != nil {
		return s.resErr
	}
	var so, se []byte
	switch {
	case s.res.Stdout != nil || s.res.Stderr != nil:
		so, se = []byte(deref(s.res.Stdout)), []byte(deref(s.res.Stderr))
	default:
		so, se = demuxLog([]byte(deref(s.res.Output)))
	}
	if s.ticketd {
		if i := bytes.IndexByte(se, '\n'); i >= 0 && bytes.HasPrefix(se, []byte("P")) {
			se = se[i+1:]
		}
	}
	if _, err := stdout.Write(so); err != nil {
		return err
	}
	_, err := stderr.Write(se)
	return err
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// demuxLog splits a labelled session log into its streams.
func demuxLog(log []byte) (stdout, stderr []byte) {
	var cur *[]byte
	for len(log) > 0 {
		switch {
		case bytes.HasPrefix(log, stdoutMarker):
			cur, log = &stdout, log[len(stdoutMarker):]
			continue
		case bytes.HasPrefix(log, stderrMarker):
			cur, log = &stderr, log[len(stderrMarker):]
			continue
		}
		n := markerIndex(log)
		if n < 0 {
			n = len(log)
		}
		if n == 0 {
			n = 1
		}
		if cur != nil {
			*cur = append(*cur, log[:n]...)
		}
		log = log[n:]
	}
	return stdout, stderr
}

// Write collects stdin, handed over at CloseStdin.
func (s *syncStream) Write(p []byte) (int, error) {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	if s.pending.Len()+len(p) > maxBufferedStdin {
		return 0, sandbox.Errorf(sandbox.ResourceExhausted, s.op, s.h.sb.ID, "stdin larger than %d bytes", maxBufferedStdin)
	}
	return s.pending.Write(p)
}

// CloseStdin launches the command with the stdin collected.
func (s *syncStream) CloseStdin() error {
	s.pmu.Lock()
	data := append([]byte{}, s.pending.Bytes()...)
	s.pmu.Unlock()
	select {
	case <-s.started:
		return s.startErr
	default:
	}
	return s.launch(data)
}

// Exit returns the answer's exit code.
func (s *syncStream) Exit(ctx context.Context) (int, error) {
	select {
	case <-s.done:
	case <-ctx.Done():
		return -1, sandbox.Wrap(sandbox.Canceled, s.op, s.h.sb.ID, ctx.Err())
	}
	if s.resErr != nil {
		return -1, s.resErr
	}
	return *s.res.ExitCode, nil
}

// Close abandons the stream; a command still running keeps its session
// until it ends (the request goes on, so the session returns to the pool
// only once it is free).
func (s *syncStream) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	s.once.Do(func() {
		s.startErr = fmt.Errorf("closed before the command started")
		close(s.started)
	})
	return nil
}
