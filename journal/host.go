package journal

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// hostPath is the journal's path on the host when the handle's file system
// is the host's (sandbox.HostPather) and this system can read it safely.
func (r *Reader) hostPath() (string, bool) {
	if !hostSupported {
		return "", false
	}
	return sandbox.HostPath(r.Handle, r.Paths.Journal)
}

// hostIdleLook is how long a host read waits, while the journal does not
// grow, before it looks at the wrapper (an exec) when nothing else tells it
// the wrapper's end: the first looks, then the later ones, and the looks of
// a reader told of the exit (Reader.Exited) that has not heard of it yet
// (its Wait failed).
const (
	hostIdleLookFirst  = time.Second
	hostIdleLookLater  = 5 * time.Second
	hostIdleLookWaited = 30 * time.Second
)

// hostTick bounds the wait between two looks at the file when inotify
// watches it (a missed event costs at most this).
const hostTick = time.Second

// errNotRegular is ErrLost's cause when the journal's path names no
// regular file at the end: the agent replaced it (a link, a FIFO).
var errNotRegular = fmt.Errorf("%w (its path names no regular file)", ErrLost)

// hostRead reads the journal straight from the host file at hp: to its
// end, then waits for it to grow, woken by inotify, by Reader.Exited or by
// a bounded tick. No process is spawned, except a liveness look (one exec
// of the poll script, header only) where nothing else tells the
// wrapper's end. The framing, the offsets and the exit rules are the
// other strategies' (framer, settle).
func (s *readState) hostRead(ctx context.Context, hp string) (*Exit, error) {
	r := s.r
	wakeC, stop, watching := watchFile(hp)
	defer func() { stop() }()
	j := newHostFile(hp)
	defer j.close()

	var firstByte <-chan time.Time
	if s.from == 0 && !s.f.gotByte && r.FirstByteTimeout > 0 {
		t := time.NewTimer(r.FirstByteTimeout - time.Since(s.started))
		defer t.Stop()
		firstByte = t.C
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	exited := r.Exited
	// The buffer starts small (most journals are a few lines) and grows to
	// chunkSize while reads fill it: a 256 KiB buffer per run is garbage
	// that costs a busy daemon time to clear and collect.
	buf := make([]byte, 16<<10)
	var (
		lastLook   time.Time // the last liveness look
		lastGrowth = time.Now()
		sentinelAt time.Time
		looks      int
	)
	for {
		// The wrapper's state is read before the journal's size.
		gone := s.knownGone()
		kind, size, err := j.look()
		if err != nil {
			return nil, sandbox.Wrap(sandbox.Internal, "journal.read", r.Paths.Token, err)
		}
		grew := false
		for kind == fileRegular && s.f.next() < size {
			if ctx.Err() != nil {
				return nil, s.canceled(ctx)
			}
			n, err := j.readAt(buf[:min(int64(len(buf)), size-s.f.next())], s.f.next())
			if err != nil {
				return nil, sandbox.Wrap(sandbox.Internal, "journal.read", r.Paths.Token, err)
			}
			if n == 0 {
				break // it shrank: the next look says how far
			}
			grew = true
			if err := s.f.feed(buf[:n]); err != nil {
				return nil, err
			}
			if n == len(buf) && len(buf) < chunkSize {
				buf = make([]byte, min(2*len(buf), chunkSize))
			}
		}
		if grew {
			lastGrowth = time.Now()
		}
		if kind == fileOther && s.exited() {
			// The wrapper is gone (whether or not this read saw its start
			// line) and the path names nothing this read can follow.
			gone = true
		}
		if gone {
			switch kind {
			case fileRegular:
				if s.f.next() < size {
					continue // it changed under the read: look again
				}
				if x, err := s.settle(header{state: "gone", size: size}); x != nil || err != nil {
					return x, err
				}
				// The size grew after the wrapper's end: another process
				// writes; read on.
			case fileMissing:
				return nil, sandbox.Wrap(sandbox.FailedPrecondition, "journal.read", r.Paths.Token, ErrLost)
			default:
				return nil, sandbox.Wrap(sandbox.FailedPrecondition, "journal.read", r.Paths.Token, errNotRegular)
			}
		} else if due := s.lookDue(exited != nil, lastLook, lastGrowth, &sentinelAt, looks); due <= 0 {
			// Nothing told the wrapper's end: look at it (an exec), as
			// the follower's check does.
			lastLook = time.Now()
			looks++
			h, _, err := s.pollOnce(ctx, 0)
			if err != nil {
				if ctx.Err() != nil {
					return nil, s.canceled(ctx)
				}
				if !transient(err) {
					return nil, err
				}
			} else {
				if h.state == "gone" && kind != fileRegular {
					if kind == fileMissing {
						return nil, sandbox.Wrap(sandbox.FailedPrecondition, "journal.read", r.Paths.Token, ErrLost)
					}
					return nil, sandbox.Wrap(sandbox.FailedPrecondition, "journal.read", r.Paths.Token, errNotRegular)
				}
				if x, err := s.settle(h); x != nil || err != nil {
					return x, err
				}
				if h.size > s.f.next() && kind == fileRegular {
					continue // bytes the look saw and the read did not yet: read them
				}
			}
		}
		if err := s.stalled(); err != nil {
			return nil, err
		}
		if !watching {
			wakeC, stop, watching = watchFile(hp)
		}
		wait := hostTick
		if !watching {
			wait = r.PollInterval
		}
		if !gone {
			wait = min(wait, max(s.lookDue(exited != nil, lastLook, lastGrowth, &sentinelAt, looks), time.Millisecond))
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil, s.canceled(ctx)
		case <-firstByte:
			if !s.f.gotByte {
				return nil, sandbox.Wrap(sandbox.DeadlineExceeded, "journal.read", r.Paths.Token, ErrStalled)
			}
		case <-wakeC:
		case <-timer.C:
		case <-exited:
			exited = nil
		}
		timer.Stop() // Go 1.23 timers: no stale tick survives Stop and Reset
	}
}

// lookDue is how long until a host read must look at the wrapper: soon
// after a sentinel at the journal's end (at once without Reader.Exited,
// after exitedWait with it, which usually closes first), else after the
// journal has been idle for a while.
func (s *readState) lookDue(watched bool, lastLook, lastGrowth time.Time, sentinelAt *time.Time, looks int) time.Duration {
	if s.f.exitAtEnd() {
		if watched {
			if sentinelAt.IsZero() {
				*sentinelAt = time.Now()
			}
			return exitedWait - time.Since(*sentinelAt)
		}
		return s.r.PollInterval - time.Since(lastLook)
	}
	*sentinelAt = time.Time{}
	idle := hostIdleLookFirst
	switch {
	case watched:
		idle = hostIdleLookWaited
	case looks >= 10:
		idle = hostIdleLookLater
	}
	ref := lastLook
	if lastGrowth.After(ref) {
		ref = lastGrowth
	}
	return idle - time.Since(ref)
}

// removeOnHost removes files with os calls where every one of them has a
// host path; done is false when they must be removed through the sandbox.
func removeOnHost(ctx context.Context, h sandbox.Handle, p Paths, files []string) (done bool, err error) {
	host := make([]string, 0, len(files))
	for _, f := range files {
		hp, ok := sandbox.HostPath(h, f)
		if !ok {
			return false, nil
		}
		host = append(host, hp)
	}
	if err := ctx.Err(); err != nil {
		return true, sandbox.Wrap(sandbox.Canceled, "journal.remove", p.Token, err)
	}
	for _, f := range host {
		// RemoveAll removes a symbolic link itself, never what it names.
		if err := os.RemoveAll(f); err != nil {
			return true, sandbox.Wrap(sandbox.Internal, "journal.remove", p.Token, err)
		}
	}
	removeRunCgroups(p.Token)
	return true, nil
}
