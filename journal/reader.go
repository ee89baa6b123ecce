package journal

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// Strategy is how a Reader follows a journal.
type Strategy string

// Strategies.
const (
	// Auto reads on the host where the sandbox's files are the host's
	// (sandbox.HostPather), follows on providers whose processes can be
	// killed and run in the background, and polls elsewhere.
	Auto Strategy = ""
	// Host reads the journal's file on the host directly, woken by inotify
	// and Reader.Exited: no process per read. Where the handle has no host
	// path it is Auto's choice among the others.
	Host Strategy = "host"
	// Follow streams the journal with a spawned tail -f: the lowest latency.
	Follow Strategy = "follow"
	// Poll reads new bytes with one exec every PollInterval.
	Poll Strategy = "poll"
)

// StrategyFor picks the strategy for a sandbox's capabilities: a follower
// that cannot be killed would leak one process per read.
func StrategyFor(caps sandbox.Capabilities) Strategy {
	if caps.BackgroundProcesses && caps.KillableProcesses {
		return Follow
	}
	return Poll
}

// Line is one journal line, or one piece of a line longer than
// Reader.MaxLine.
//
// A line longer than MaxLine bytes (without its newline) is delivered as
// pieces: pieces of exactly MaxLine bytes, cut at multiples of MaxLine from
// the line's start, each with Partial true and End just past the piece,
// then the rest of the line (1 to MaxLine bytes) with Partial false and End
// just past the newline. The cuts do not depend on how the bytes arrived,
// so a read resumed at any End cuts the rest of the line where the first
// read did. A line of at most MaxLine bytes is one Line with Partial false.
type Line struct {
	Data []byte // without the newline
	End  int64  // the absolute offset just past the newline (or the piece): where to resume
	// Partial is true on every piece of a long line but its last.
	Partial bool
	// Diff is set (and Data empty) on the wrapper's working-tree diff line,
	// which is delivered just before the exit (see the package doc).
	Diff *Diff
}

// Diff is the working-tree change of a run, as a git patch.
type Diff struct {
	Patch     []byte
	Truncated bool // cut at MaxDiff bytes
}

// Exit is the end of a run as its journal records it.
type Exit struct {
	Code int   // the agent's exit code
	End  int64 // the offset just past the sentinel line
}

// ErrStalled means a journal read from its start saw no byte within the
// first-byte deadline: the agent never started.
var ErrStalled = errors.New("journal: no output within the first-byte deadline; the agent never started")

// ErrLost means the agent's wrapper is gone but the journal has no exit
// sentinel: the agent was killed (or the sandbox restarted) before it could
// record its exit.
var ErrLost = errors.New("journal: the agent is gone and its journal has no exit line")

// Reader reads a run's journal.
type Reader struct {
	Handle sandbox.Handle
	Paths  Paths
	Nonce  string
	// Strategy defaults to Host where the handle's files are the host's,
	// else to StrategyFor(Handle.Capabilities()).
	Strategy Strategy
	// PollInterval is the pause between poll reads once a poll has caught
	// up. Default 250ms.
	PollInterval time.Duration
	// FirstByteTimeout bounds the wait for the journal's first byte when
	// reading from offset 0. Default 10s; negative disables it.
	FirstByteTimeout time.Duration
	// MaxPollBytes bounds one poll read; a poll that is behind reads on,
	// chunk after chunk, until it has caught up. Default 4 MiB.
	MaxPollBytes int
	// MaxLine bounds a delivered line: longer lines come in pieces (see
	// Line). Default DefaultMaxLine (1 MiB); values under 256 are raised to
	// 256. The reader's memory is bounded by MaxLine (or a diff line, which
	// is held whole up to 1.4 MiB) plus its chunk buffers, whatever the
	// line length.
	MaxLine int
	// Exited, when set, is closed once the wrapper is known to have
	// exited: the process that spawned it saw it end (StartWatch). The
	// wrapper is then gone without a look at the sandbox's processes, so
	// the exit (or the loss) costs one size check, and it is noticed at
	// once instead of at the next poll. A reader without it (a takeover)
	// finds the wrapper's end as before (see the package doc).
	Exited <-chan struct{}
}

func (r *Reader) defaults() {
	if r.Strategy == Auto {
		if _, ok := r.hostPath(); ok {
			r.Strategy = Host
		}
	}
	if r.Strategy == Auto || r.Strategy == Host {
		if _, ok := r.hostPath(); !ok {
			r.Strategy = StrategyFor(r.Handle.Capabilities())
		}
	}
	if r.PollInterval <= 0 {
		r.PollInterval = 250 * time.Millisecond
	}
	if r.FirstByteTimeout == 0 {
		r.FirstByteTimeout = 10 * time.Second
	}
	if r.MaxPollBytes <= 0 {
		r.MaxPollBytes = 4 << 20
	}
	if r.MaxLine <= 0 {
		r.MaxLine = DefaultMaxLine
	}
}

// Read delivers every line after byte offset from to fn, in order, until
// the exit, and returns the exit. Every byte the agent wrote reaches fn,
// whatever the rate and the line length (long lines in pieces, see Line).
// The journal's start line and the wrapper's own lines are not delivered,
// except the diff line that counts, just before the exit; how the exit is
// told from a forged one is in the package doc. Read returns ctx's error
// when ctx ends first, ErrStalled or ErrLost as documented, or fn's error.
// The follower process is always killed before Read returns; a follower
// that ends early (killed by the agent, say) is replaced, by polling if it
// keeps ending, from the offset reached.
func (r *Reader) Read(ctx context.Context, from int64, fn func(Line) error) (Exit, error) {
	r.defaults()
	if from < 0 {
		return Exit{}, sandbox.Errorf(sandbox.InvalidArgument, "journal.read", r.Paths.Token, "negative offset %d", from)
	}
	s := &readState{r: r, f: newFramer(from, r.MaxLine, r.Nonce, fn), from: from, started: time.Now()}
	var x *Exit
	var err error
	switch r.Strategy {
	case Host:
		hp, _ := r.hostPath()
		x, err = s.hostRead(ctx, hp)
	case Follow:
		x, err = s.follow(ctx)
	default:
		x, err = s.pollLoop(ctx, false)
	}
	if err != nil {
		return Exit{}, err
	}
	return *x, nil
}

// maxFollowerRestarts bounds how often a read replaces a follower that
// ended while the wrapper ran; after that it polls.
const maxFollowerRestarts = 8

type readState struct {
	r       *Reader
	f       *framer
	from    int64
	started time.Time
}

// exited reports whether the wrapper is known to have exited (Reader.Exited).
func (s *readState) exited() bool {
	if s.r.Exited == nil {
		return false
	}
	select {
	case <-s.r.Exited:
		return true
	default:
		return false
	}
}

// knownGone reports whether a poll can skip the liveness check: the
// wrapper is known to have exited and the framer read the start line (so
// it knows the journal's form).
func (s *readState) knownGone() bool { return s.f.start != nil && s.exited() }

// header is what a poll found: the wrapper's state, read first, then the
// journal's size, then whether the journal has the current form.
type header struct {
	state   string // "missing", "unstarted", "alive" or "gone"
	size    int64
	current bool
}

func (s *readState) canceled(ctx context.Context) error {
	return sandbox.Wrap(sandbox.Canceled, "journal.read", s.r.Paths.Token, ctx.Err())
}

func (s *readState) stalled() error {
	r := s.r
	if !s.f.gotByte && s.from == 0 && r.FirstByteTimeout > 0 && time.Since(s.started) > r.FirstByteTimeout {
		return sandbox.Wrap(sandbox.DeadlineExceeded, "journal.read", r.Paths.Token, ErrStalled)
	}
	return nil
}

// settle decides from a poll's header: the exit, ErrLost, or neither yet.
func (s *readState) settle(h header) (*Exit, error) {
	gone := h.state == "gone"
	x, err := s.f.decide(gone, h.size, h.current)
	if x != nil || err != nil {
		return x, err
	}
	if gone && s.f.next() >= h.size {
		// No end line can follow: an empty line held back is the agent's.
		if err := s.f.flushEmpty(); err != nil {
			return nil, err
		}
		return nil, sandbox.Wrap(sandbox.FailedPrecondition, "journal.read", s.r.Paths.Token, ErrLost)
	}
	return nil, nil
}

// followScript streams the journal from an offset. It creates the journal
// (without truncating) so tail cannot exit on a missing file. A watchdog
// ends the follower once it can have nothing more to send: the wrapper is
// gone, the journal stopped growing and tail has read it to its end (where
// /proc/PID/fdinfo tells tail's offset), or after 10 minutes of a gone
// wrapper whatever tail's offset (its reader is stuck or dead), or after
// 10 minutes without a start line. Whatever it did not send, the reader
// polls. The watchdog looks every second for its first ten looks, then
// every five seconds: a reader that lives ends its follower itself, so
// the watchdog only bounds a follower whose reader went away. When the
// reader has read the start line it passes the wrapper's pid and start
// time: while that process runs with that start time the watchdog needs no
// other process (built-ins only), and it still runs the full check every
// twelfth look, so a forged start line keeps an orphaned follower a minute
// at most. $1 journal, $2 offset+1, $3 "PID:STARTTIME" or "".
const followScript = aliveFn + `cf_j=$1 cf_wp=${3%%:*} cf_wt=${3#*:}
[ -d "${cf_j%/*}" ] || mkdir -p "${cf_j%/*}" 2>/dev/null; : >>"$cf_j" 2>/dev/null
tail -c "+$2" -f "$cf_j" 2>/dev/null &
cf_t=$!
(
  cf_n=0 cf_g=0 cf_last=-1 cf_k=0 cf_w=1
  while kill -0 "$cf_t" 2>/dev/null; do
    sleep $cf_w
    cf_k=$((cf_k+1))
    [ $cf_k -ge 10 ] && cf_w=5
    if [ -n "$cf_wp" ] && [ $((cf_k % 12)) -ne 0 ] && IFS= read -r cf_st 2>/dev/null <"/proc/$cf_wp/stat" && cj_alive_stat "$cf_wt" ${cf_st##*) }; then
      cf_r=0
    else
      cj_alive "$cf_j"; cf_r=$?
    fi
    case $cf_r in
    0) cf_n=0 cf_g=0 cf_last=-1 ;;
    1)
      cf_s=$(cj_size "$cf_j")
      cf_p=$(cj_readpos "$cf_t" "$cf_j")
      cf_g=$((cf_g+1))
      if [ "$cf_s" = "$cf_last" ] && { [ -z "$cf_p" ] || [ "$cf_p" -ge "$cf_s" ]; }; then kill "$cf_t" 2>/dev/null; exit 0; fi
      [ "$cf_g" -gt 120 ] && { kill "$cf_t" 2>/dev/null; exit 0; }
      cf_last=$cf_s ;;
    *) cf_n=$((cf_n+1)); [ "$cf_n" -gt 120 ] && { kill "$cf_t" 2>/dev/null; exit 0; } ;;
    esac
  done
) >/dev/null 2>&1 </dev/null &
wait "$cf_t"
`

// chunkSize is the follower's read size.
const chunkSize = 256 << 10

type chunk struct {
	b   []byte
	err error
}

// follow streams the journal, replacing a follower that ends before the
// exit: by a catch-up poll, then a new follower while the wrapper runs.
func (s *readState) follow(ctx context.Context) (*Exit, error) {
	for restarts := 0; ; restarts++ {
		x, err := s.followOnce(ctx)
		if x != nil || err != nil {
			return x, err
		}
		// The follower ended (its watchdog saw the wrapper go, someone
		// killed it, or the sandbox went away): poll on from the offset
		// reached, in bounded chunks, until the exit or the wrapper's
		// loss; or, while the wrapper runs, until caught up.
		x, err = s.pollLoop(ctx, restarts < maxFollowerRestarts)
		if x != nil || err != nil {
			return x, err
		}
	}
}

// followOnce runs one follower until the exit or the follower's end
// (nil, nil).
func (s *readState) followOnce(ctx context.Context) (*Exit, error) {
	r := s.r
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wrapper := ""
	if st := s.f.start; st != nil && st.Current {
		wrapper = strconv.Itoa(st.PID) + ":" + strconv.FormatUint(st.StartTime, 10)
	}
	pr, err := r.Handle.Spawn(fctx, sandbox.Command{Args: []string{"sh", "-c", followScript, "corral-follow", r.Paths.Journal, strconv.FormatInt(s.f.next()+1, 10), wrapper}})
	if err != nil {
		if ctx.Err() != nil {
			return nil, s.canceled(ctx)
		}
		if transient(err) {
			// The sandbox could not start a follower (out of processes
			// under a fork bomb, a busy engine): poll instead.
			return nil, nil
		}
		return nil, err
	}
	defer func() {
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer kcancel()
		_ = pr.Kill(kctx, 0)
	}()
	go func() { _, _ = io.Copy(io.Discard, pr.Stderr()) }()

	free := make(chan []byte, 4)
	for range cap(free) {
		free <- make([]byte, chunkSize)
	}
	chunks := make(chan chunk, cap(free))
	go func() {
		for {
			var buf []byte
			select {
			case buf = <-free:
			case <-fctx.Done():
				return
			}
			n, err := pr.Stdout().Read(buf)
			select {
			case chunks <- chunk{buf[:n], err}:
			case <-fctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var firstByte <-chan time.Time
	if s.from == 0 && !s.f.gotByte && r.FirstByteTimeout > 0 {
		t := time.NewTimer(r.FirstByteTimeout - time.Since(s.started))
		defer t.Stop()
		firstByte = t.C
	}
	recheck := time.NewTimer(time.Hour)
	recheck.Stop()
	defer recheck.Stop()
	var lastCheck, sentinelAt time.Time
	goneSize := int64(-1) // the size found after the wrapper was known to have exited
	// exited fires once when the wrapper is known to have exited.
	exited := r.Exited
	// check looks at the wrapper when the journal, as received, ends with
	// a sentinel (or, once the wrapper is known to have exited, whatever it
	// ends with): the exit (or the loss) if the wrapper is gone, else a
	// look again later unless more bytes are on their way.
	check := func() (*Exit, error) {
		gone := s.knownGone()
		if !s.f.exitAtEnd() && !gone {
			return nil, nil
		}
		if gone && s.f.next() < goneSize {
			return nil, nil // the bytes up to that size are on their way
		}
		if !gone && exited != nil {
			// The wrapper's exit will be told: it writes the sentinel
			// last, so that is a matter of moments. Look anyway if it
			// is not.
			if sentinelAt.IsZero() {
				sentinelAt = time.Now()
			}
			if wait := exitedWait - time.Since(sentinelAt); wait > 0 {
				recheck.Reset(wait)
				return nil, nil
			}
		}
		if wait := r.PollInterval - time.Since(lastCheck); wait > 0 && !gone {
			recheck.Reset(wait)
			return nil, nil
		}
		lastCheck = time.Now()
		h, _, err := s.pollOnce(ctx, 0)
		if err != nil {
			if ctx.Err() != nil {
				return nil, s.canceled(ctx)
			}
			return nil, err
		}
		var x *Exit
		if gone {
			goneSize = h.size
			x, err = s.settle(h)
		} else {
			x, err = s.f.decide(h.state == "gone", h.size, h.current)
		}
		if x == nil && err == nil && h.size <= s.f.next() {
			recheck.Reset(r.PollInterval)
		}
		return x, err
	}
	for {
		select {
		case <-ctx.Done():
			return nil, s.canceled(ctx)
		case <-firstByte:
			if !s.f.gotByte {
				return nil, sandbox.Wrap(sandbox.DeadlineExceeded, "journal.read", r.Paths.Token, ErrStalled)
			}
		case c := <-chunks:
			err := s.f.feed(c.b)
			free <- c.b[:cap(c.b)]
			if err != nil {
				return nil, err
			}
			if c.err != nil {
				return nil, nil
			}
			if x, err := check(); x != nil || err != nil {
				return x, err
			}
		case <-recheck.C:
			if x, err := check(); x != nil || err != nil {
				return x, err
			}
		case <-exited:
			exited = nil
			if x, err := check(); x != nil || err != nil {
				return x, err
			}
		}
	}
}

// exitedWait is how long a reader told of the wrapper's exit (Reader.Exited)
// waits for it after the sentinel before it looks at the wrapper itself.
const exitedWait = 2 * time.Second

// pollScript prints a header line "<state> <size> <current>" — the
// wrapper's state (missing, unstarted, alive, gone), read first, then the
// journal's size, then 1 when the start line has the current form — then
// the base64 of at most $3 of the journal's bytes after an offset. $1
// journal, $2 offset+1, $3 max bytes, $4 "gone" when the wrapper is known
// to have exited (Reader.Exited): no liveness check then, and the form is
// printed as 0 (the reader read the start line itself).
const pollScript = aliveFn + `cp_j=$1
if [ ! -f "$cp_j" ]; then echo "missing 0 0"; exit 0; fi
if [ "$4" = gone ]; then cp_a=gone; else
cj_alive "$cp_j"
case $? in 0) cp_a=alive ;; 1) cp_a=gone ;; *) cp_a=unstarted ;; esac
fi
echo "$cp_a $(cj_size "$cp_j") ${cj_wnew:-0}"
if [ "$3" -gt 0 ]; then tail -c "+$2" "$cp_j" 2>/dev/null | head -c "$3" | base64; fi
exit 0
`

// pollOnce reads the header and up to max new bytes.
func (s *readState) pollOnce(ctx context.Context, max int) (header, []byte, error) {
	r := s.r
	if max == 0 && s.knownGone() {
		return s.sizeOnce(ctx)
	}
	gone := ""
	if s.knownGone() {
		gone = "gone"
	}
	res, err := r.Handle.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", pollScript, "corral-poll", r.Paths.Journal, strconv.FormatInt(s.f.next()+1, 10), strconv.Itoa(max), gone}})
	if err != nil {
		return header{}, nil, err
	}
	head, body, _ := bytes.Cut(res.Stdout, []byte("\n"))
	f := strings.Fields(string(head))
	if res.ExitCode != 0 || len(f) != 3 {
		return header{}, nil, sandbox.Errorf(sandbox.Internal, "journal.poll", r.Paths.Token, "poll exited %d: %q %s", res.ExitCode, head, strings.TrimSpace(string(res.Stderr)))
	}
	h := header{state: f[0], current: f[2] == "1"}
	if h.size, err = strconv.ParseInt(f[1], 10, 64); err != nil {
		return header{}, nil, sandbox.Errorf(sandbox.Internal, "journal.poll", r.Paths.Token, "poll header %q", head)
	}
	data, err := decodeBase64(body)
	if err != nil {
		return header{}, nil, sandbox.Wrap(sandbox.Internal, "journal.poll", r.Paths.Token, err)
	}
	return h, data, nil
}

// sizeOnce is the header of a wrapper known to have exited: the journal's
// size, from one ls (no shell).
func (s *readState) sizeOnce(ctx context.Context) (header, []byte, error) {
	r := s.r
	res, err := r.Handle.Exec(ctx, sandbox.Command{Args: []string{"ls", "-ln", "--", r.Paths.Journal}})
	if err != nil {
		return header{}, nil, err
	}
	if res.ExitCode != 0 {
		return header{state: "missing"}, nil, nil
	}
	f := strings.Fields(string(res.Stdout))
	var size int64
	if len(f) >= 5 {
		size, err = strconv.ParseInt(f[4], 10, 64)
	}
	if len(f) < 5 || err != nil {
		return header{}, nil, sandbox.Errorf(sandbox.Internal, "journal.poll", r.Paths.Token, "unexpected ls output %q", res.Stdout)
	}
	return header{state: "gone", size: size}, nil, nil
}

// pollLoop polls in bounded chunks until the exit or the wrapper's loss;
// with untilCaughtUp, it returns (nil, nil) once it has read every byte
// while the wrapper runs.
func (s *readState) pollLoop(ctx context.Context, untilCaughtUp bool) (*Exit, error) {
	r := s.r
	fails := 0
	for {
		h, data, err := s.pollOnce(ctx, r.MaxPollBytes)
		if err != nil {
			if ctx.Err() != nil {
				return nil, s.canceled(ctx)
			}
			// A poll can fail for a while without anything being wrong
			// with the run: the agent's fork bomb took every process slot
			// until the wrapper's cleanup, or the engine is overloaded.
			// Retry with a growing pause; a gone sandbox is final.
			if !transient(err) || fails >= maxPollFailures {
				return nil, err
			}
			fails++
			select {
			case <-ctx.Done():
				return nil, s.canceled(ctx)
			case <-time.After(min(r.PollInterval<<min(fails, 4), 2*time.Second)):
			}
			continue
		}
		fails = 0
		if err := s.f.feed(data); err != nil {
			return nil, err
		}
		if x, err := s.settle(h); x != nil || err != nil {
			return x, err
		}
		if len(data) > 0 && s.f.next() < h.size {
			continue // behind: read on at once
		}
		if untilCaughtUp && h.state == "alive" {
			return nil, nil
		}
		if err := s.stalled(); err != nil {
			return nil, err
		}
		var exited <-chan struct{}
		if !s.exited() {
			exited = r.Exited // a wrapper that exits ends the pause
		}
		select {
		case <-ctx.Done():
			return nil, s.canceled(ctx)
		case <-time.After(r.PollInterval):
		case <-exited:
		}
	}
}

// maxPollFailures bounds the consecutive failed polls a read retries
// (about half a minute with the default interval).
const maxPollFailures = 20

// transient reports an error of an exec that may work when tried again:
// not a gone sandbox, a bad argument or a cancelled caller. A wrapper that
// could not start (FailedPrecondition: no process slot left under a fork
// bomb) is transient too; a stopped sandbox fails after the retries.
func transient(err error) bool {
	switch sandbox.CodeOf(err) {
	case sandbox.Internal, sandbox.Unavailable, sandbox.Unknown, sandbox.ResourceExhausted, sandbox.FailedPrecondition:
		return true
	}
	return false
}

// decodeBase64 decodes base64 that may be wrapped at any column (BusyBox
// has no -w 0). A frame that ends mid-quantum is an error, never silently
// short.
func decodeBase64(b []byte) ([]byte, error) {
	clean := make([]byte, 0, len(b))
	for _, c := range b {
		if c != '\n' && c != '\r' && c != ' ' && c != '\t' {
			clean = append(clean, c)
		}
	}
	if len(clean)%4 != 0 {
		return nil, errors.New("journal: base64 frame ended mid-quantum")
	}
	out := make([]byte, base64.StdEncoding.DecodedLen(len(clean)))
	n, err := base64.StdEncoding.Decode(out, clean)
	if err != nil {
		return nil, err
	}
	return out[:n], nil
}
