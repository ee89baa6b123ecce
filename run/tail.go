package run

import "github.com/d10ffeed/corral/store"

// The tail is what a driver appended last, kept in memory so that a
// follower in the same process (Follow) is served without a store read:
// the events exactly as the store holds them (the driver stamps their time
// itself, so the stored time is known), and whether the log was closed.
// It covers the sequence numbers (tailBase, lastSeq]; a follower behind
// tailBase, or any doubt (the tail not known yet, the driver stopped),
// reads the store as before.
const (
	// tailEvents bounds the events the tail keeps.
	tailEvents = 256
	// tailBytes bounds the payload bytes the tail keeps.
	tailBytes = 1 << 20
)

// tailState is the driver's in-memory tail of its log; guarded by
// driver.mu.
type tailState struct {
	tailKnown  bool          // tailBase is set: the log's last seq at the claim was read
	tailBase   int64         // the sequence number just before tail[0]
	tail       []store.Event // appended by this driver, in order, ending at lastSeq
	tailSize   int           // payload bytes in tail
	tailClosed bool          // this driver closed the log
}

// startTail sets the tail's base: the log holds last events now.
// d.mu must be held.
func (d *driver) startTail(last int64) {
	d.tailKnown, d.tailBase, d.tail, d.tailSize = true, last, nil, 0
}

// addTail records an append of evs (their sequence numbers follow
// lastSeq, which the caller advances). d.mu must be held.
func (d *driver) addTail(evs []store.Event) {
	if !d.tailKnown {
		return
	}
	for _, e := range evs {
		d.tail = append(d.tail, e)
		d.tailSize += len(e.Data)
	}
	drop := 0
	for drop < len(d.tail) && (len(d.tail)-drop > tailEvents || d.tailSize > tailBytes) {
		d.tailSize -= len(d.tail[drop].Data)
		drop++
	}
	if drop > 0 {
		d.tailBase = d.tail[drop-1].Seq
		clear(d.tail[:drop])
		d.tail = append(d.tail[:0], d.tail[drop:]...)
	}
}

// since returns, under one lock, the channel closed at the next append
// and, when the tail can tell, the events after seq after (at most limit)
// and whether the log is closed after them. ok is false when the store
// must be read instead. The events' payloads are shared: callers must not
// change them.
func (d *driver) since(after int64, limit int) (wake <-chan struct{}, evs []store.Event, closed, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	wake = d.notify
	select {
	case <-d.done:
		return wake, nil, false, false // stopped: whatever came after is in the store
	default:
	}
	if !d.tailKnown || after < d.tailBase || after > d.lastSeq {
		return wake, nil, false, false
	}
	evs = d.tail[after-d.tailBase:]
	if len(evs) > limit {
		evs = evs[:limit]
	}
	return wake, append([]store.Event(nil), evs...), d.tailClosed && len(evs) == int(d.lastSeq-after), true
}
