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
	// Auto follows on providers whose processes can be killed and run in
	// the background, and polls elsewhere.
	Auto Strategy = ""
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

// Line is one complete journal line.
type Line struct {
	Data []byte // without the newline
	End  int64  // the absolute offset just past the newline: where to resume
	// Partial is set when Data is a piece of a line longer than the
	// reader's MaxLine: the line continues in the next Line.
	Partial bool
	// Diff is set (and Data empty) on the wrapper's working-tree diff line,
	// which comes after the agent's last line and before the exit.
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
	// Strategy defaults to StrategyFor(Handle.Capabilities()).
	Strategy Strategy
	// PollInterval is the pause between poll reads. Default 250ms.
	PollInterval time.Duration
	// FirstByteTimeout bounds the wait for the journal's first byte when
	// reading from offset 0. Default 10s; negative disables it.
	FirstByteTimeout time.Duration
	// MaxPollBytes bounds one poll read. Default 4 MiB.
	MaxPollBytes int
}

func (r *Reader) defaults() {
	if r.Strategy == Auto {
		r.Strategy = StrategyFor(r.Handle.Capabilities())
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
}

// Read delivers every complete line after byte offset from to fn, in order,
// until the exit sentinel, and returns the exit. The journal's start line is
// not delivered. Read returns ctx's error when ctx ends first, ErrStalled or
// ErrLost as documented, or fn's error. The follower process is always
// killed before Read returns.
func (r *Reader) Read(ctx context.Context, from int64, fn func(Line) error) (Exit, error) {
	r.defaults()
	if from < 0 {
		return Exit{}, sandbox.Errorf(sandbox.InvalidArgument, "journal.read", r.Paths.Token, "negative offset %d", from)
	}
	st := &readState{r: r, fn: fn, pos: from, pid: -1}
	if r.Strategy == Follow {
		return st.follow(ctx)
	}
	return st.poll(ctx)
}

type readState struct {
	r       *Reader
	fn      func(Line) error
	pos     int64 // offset of the first byte not yet framed into a line
	partial []byte
	pid     int // the wrapper's pid, once the start line was seen
	gotByte bool
	exit    *Exit
}

// feed frames bytes into lines and delivers them; it stops at the sentinel.
func (s *readState) feed(b []byte) error {
	if len(b) > 0 {
		s.gotByte = true
	}
	s.partial = append(s.partial, b...)
	for s.exit == nil {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			break
		}
		line := s.partial[:i]
		start := s.pos
		s.pos += int64(i + 1)
		rest := s.partial[i+1:]
		if code, ok := ParseSentinel(line, s.r.Nonce); ok {
			s.exit = &Exit{Code: code, End: s.pos}
			s.partial = nil
			return nil
		}
		if start == 0 {
			if pid, ok := ParseStart(line); ok {
				s.pid = pid
				s.partial = rest
				continue
			}
		}
		l := Line{Data: bytes.Clone(line), End: s.pos}
		if patch, cut, ok := ParseDiff(line, s.r.Nonce); ok {
			l = Line{End: s.pos, Diff: &Diff{Patch: patch, Truncated: cut}}
		}
		if err := s.fn(l); err != nil {
			return err
		}
		s.partial = rest
	}
	// Keep an unterminated tail for the next chunk; compact the buffer.
	s.partial = append([]byte(nil), s.partial...)
	return nil
}

// followScript streams the journal from an offset. It creates the journal
// (without truncating) so tail cannot exit on a missing file, and a
// watchdog ends the follower once the wrapper is gone, so a follower whose
// reader died does not run for ever. $1 journal, $2 offset+1.
const followScript = `cf_j=$1
mkdir -p "${cf_j%/*}" 2>/dev/null; : >>"$cf_j" 2>/dev/null
tail -c "+$2" -f "$cf_j" 2>/dev/null &
cf_t=$!
(
  cf_n=0
  while kill -0 "$cf_t" 2>/dev/null; do
    IFS= read -r cf_l 2>/dev/null <"$cf_j"
    case "$cf_l" in
    '{"__start":'*)
      cf_p=${cf_l#*:}; cf_p=${cf_p%\}}
      if ! kill -0 "$cf_p" 2>/dev/null; then sleep 2; kill "$cf_t" 2>/dev/null; exit 0; fi ;;
    *) cf_n=$((cf_n+1)); [ "$cf_n" -gt 600 ] && { kill "$cf_t" 2>/dev/null; exit 0; } ;;
    esac
    sleep 1
  done
) >/dev/null 2>&1 </dev/null &
wait "$cf_t"
`

func (s *readState) follow(ctx context.Context) (Exit, error) {
	r := s.r
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr, err := r.Handle.Spawn(fctx, sandbox.Command{Args: []string{"sh", "-c", followScript, "corral-follow", r.Paths.Journal, strconv.FormatInt(s.pos+1, 10)}})
	if err != nil {
		return Exit{}, err
	}
	defer func() {
		kctx, kcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer kcancel()
		_ = pr.Kill(kctx, 0)
	}()
	go func() { _, _ = io.Copy(io.Discard, pr.Stderr()) }()

	type chunk struct {
		b   []byte
		err error
	}
	chunks := make(chan chunk, 16)
	go func() {
		for {
			buf := make([]byte, 64*1024)
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
	if s.pos == 0 && r.FirstByteTimeout > 0 {
		t := time.NewTimer(r.FirstByteTimeout)
		defer t.Stop()
		firstByte = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return Exit{}, sandbox.Wrap(sandbox.Canceled, "journal.read", r.Paths.Token, ctx.Err())
		case <-firstByte:
			if !s.gotByte {
				return Exit{}, sandbox.Wrap(sandbox.DeadlineExceeded, "journal.read", r.Paths.Token, ErrStalled)
			}
		case c := <-chunks:
			if err := s.feed(c.b); err != nil {
				return Exit{}, err
			}
			if s.exit != nil {
				return *s.exit, nil
			}
			if c.err != nil {
				// The follower ended (its watchdog saw the wrapper go, or
				// the sandbox went away). Whatever was written last is
				// read by one bounded poll.
				return s.finalPoll(ctx)
			}
		}
	}
}

// finalPoll reads what is left once and fails with ErrLost without a
// sentinel.
func (s *readState) finalPoll(ctx context.Context) (Exit, error) {
	data, _, _, err := s.pollOnce(ctx)
	if err != nil {
		return Exit{}, err
	}
	if err := s.feed(data); err != nil {
		return Exit{}, err
	}
	if s.exit != nil {
		return *s.exit, nil
	}
	return Exit{}, sandbox.Wrap(sandbox.FailedPrecondition, "journal.read", s.r.Paths.Token, ErrLost)
}

// pollScript prints the journal's bytes after an offset (bounded) as
// base64, then on stderr whether the journal exists and whether the
// wrapper is alive. $1 journal, $2 offset+1, $3 max bytes.
const pollScript = `cp_j=$1
if [ ! -f "$cp_j" ]; then echo missing >&2; exit 0; fi
tail -c "+$2" "$cp_j" 2>/dev/null | head -c "$3" | base64
IFS= read -r cp_l <"$cp_j"
case "$cp_l" in
'{"__start":'*)
  cp_p=${cp_l#*:}; cp_p=${cp_p%\}}
  if kill -0 "$cp_p" 2>/dev/null; then echo alive >&2; else echo gone >&2; fi ;;
*) echo unstarted >&2 ;;
esac
`

// pollOnce reads new bytes; state is "missing", "unstarted", "alive" or
// "gone".
func (s *readState) pollOnce(ctx context.Context) (data []byte, state string, more bool, err error) {
	r := s.r
	off := s.pos + int64(len(s.partial))
	res, err := r.Handle.Exec(ctx, sandbox.Command{Args: []string{"sh", "-c", pollScript, "corral-poll", r.Paths.Journal, strconv.FormatInt(off+1, 10), strconv.Itoa(r.MaxPollBytes)}})
	if err != nil {
		return nil, "", false, err
	}
	if res.ExitCode != 0 {
		return nil, "", false, sandbox.Errorf(sandbox.Internal, "journal.poll", r.Paths.Token, "poll exited %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	data, err = decodeBase64(res.Stdout)
	if err != nil {
		return nil, "", false, sandbox.Wrap(sandbox.Internal, "journal.poll", r.Paths.Token, err)
	}
	return data, strings.TrimSpace(string(res.Stderr)), len(data) >= r.MaxPollBytes, nil
}

func (s *readState) poll(ctx context.Context) (Exit, error) {
	r := s.r
	started := time.Now()
	for {
		data, state, more, err := s.pollOnce(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return Exit{}, sandbox.Wrap(sandbox.Canceled, "journal.read", r.Paths.Token, ctx.Err())
			}
			return Exit{}, err
		}
		if err := s.feed(data); err != nil {
			return Exit{}, err
		}
		if s.exit != nil {
			return *s.exit, nil
		}
		if more {
			continue
		}
		if state == "gone" && len(data) == 0 {
			// The wrapper may have written its sentinel and exited between
			// the read and the liveness check: read once more, now that it
			// is surely gone.
			return s.finalPoll(ctx)
		}
		if !s.gotByte && s.pos == 0 && r.FirstByteTimeout > 0 && time.Since(started) > r.FirstByteTimeout {
			return Exit{}, sandbox.Wrap(sandbox.DeadlineExceeded, "journal.read", r.Paths.Token, ErrStalled)
		}
		select {
		case <-ctx.Done():
			return Exit{}, sandbox.Wrap(sandbox.Canceled, "journal.read", r.Paths.Token, ctx.Err())
		case <-time.After(r.PollInterval):
		}
	}
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
