package run

import (
	"bytes"
	"context"
	"fmt"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/store"
)

// emit takes translated events: those the log already holds (a replay
// after a takeover) are checked against it and skipped; the rest are
// queued for the next append.
func (d *driver) emit(evs []event.Event) error {
	for _, e := range evs {
		d.produced++
		data := e.Marshal()
		if d.produced <= d.stored {
			stored, err := d.storedEvent(d.produced)
			if err != nil {
				return err
			}
			if stored.Type != string(e.Type) || !bytes.Equal(stored.Data, data) {
				return fmt.Errorf("%w at event %d: stored %s, replayed %s", errDiverged, d.produced, stored.Data, data)
			}
			continue
		}
		d.pending = append(d.pending, store.NewEvent{Type: string(e.Type), Data: data})
	}
	return nil
}

// storedEvent returns stored event seq, reading the log in batches.
func (d *driver) storedEvent(seq int64) (store.Event, error) {
	if len(d.verify) == 0 || d.verify[0].Seq > seq || d.verify[len(d.verify)-1].Seq < seq {
		evs, err := d.r.store.ReadEvents(d.ctx, d.run.ID, seq-1, 1000)
		if err != nil {
			return store.Event{}, err
		}
		if len(evs) == 0 || evs[0].Seq != seq {
			return store.Event{}, fmt.Errorf("%w: stored event %d is missing", errDiverged, seq)
		}
		d.verify = evs
	}
	return d.verify[seq-d.verify[0].Seq], nil
}

// flush appends the pending events, fenced by the driver epoch and the
// expected next sequence number.
func (d *driver) flush(ctx context.Context) error {
	if len(d.pending) == 0 {
		return nil
	}
	d.mu.Lock()
	first := d.lastSeq + 1
	d.mu.Unlock()
	if err := d.r.store.AppendEvents(ctx, d.run.ID, d.run.DriverEpoch, first, d.pending); err != nil {
		return err
	}
	d.mu.Lock()
	d.lastSeq += int64(len(d.pending))
	d.mu.Unlock()
	d.pending = d.pending[:0]
	d.broadcast()
	return nil
}

func (d *driver) broadcast() {
	d.mu.Lock()
	close(d.notify)
	d.notify = make(chan struct{})
	d.mu.Unlock()
}

// changed returns a channel closed at the next append (or when driving
// stops) and the last sequence number now.
func (d *driver) changed() (<-chan struct{}, int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.notify, d.lastSeq
}
