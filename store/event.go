package store

import (
	"context"
	"encoding/json"
	"time"
)

// Event is one delivered event of a run, as stored.
type Event struct {
	// RunID is the run the event belongs to.
	RunID string
	// Seq is the event's position in the run's log: 1-based and dense (no
	// gaps, no duplicates).
	Seq int64
	// Type names the event.
	Type string
	// Data is the event's JSON payload, byte for byte as appended; nil when
	// none was given.
	Data json.RawMessage
	// Time is when the event happened (milliseconds, UTC).
	Time time.Time
}

// NewEvent is an event to append.
type NewEvent struct {
	// Type names the event. Required.
	Type string
	// Data is the payload: valid JSON, or empty for none.
	Data json.RawMessage
	// Time is when the event happened; zero means the time of the append.
	Time time.Time
}

// EventLog keeps each run's events. The log of a run lives beside the run's
// record (RunStore) in the same database: an append checks the run's
// DriverEpoch in the same transaction that writes the events, so a driver
// whose claim was superseded can never add to the log, however late its
// write arrives.
//
// A run's log is open from the run's creation until CloseLog; every
// operation on the log of a run that does not exist is NotFound.
type EventLog interface {
	// AppendEvents appends events as seq firstSeq, firstSeq+1, ... in one
	// transaction: all land or none. It is refused with
	//   - FailedPrecondition when epoch is not the run's current DriverEpoch
	//     (the writer was superseded) or the log is closed;
	//   - AlreadyExists when firstSeq is at or below the last stored seq (the
	//     events, or others, are already there: a double append never
	//     duplicates);
	//   - FailedPrecondition when firstSeq is past the last stored seq + 1
	//     (it would leave a gap);
	//   - InvalidArgument when firstSeq < 1, an event has no Type or its Data
	//     is not valid JSON.
	// Appending no events only checks the fences.
	AppendEvents(ctx context.Context, runID string, epoch int64, firstSeq int64, events []NewEvent) error
	// ReadEvents returns the events after afterSeq in order, at most limit of
	// them (0 means no cap).
	ReadEvents(ctx context.Context, runID string, afterSeq int64, limit int) ([]Event, error)
	// LastSeq returns the seq of the last stored event, 0 for an empty log.
	LastSeq(ctx context.Context, runID string) (int64, error)
	// LogSize returns how many bytes the run's log holds: the sum of the
	// lengths of its events' Data (0 for an empty log). It is kept beside
	// the log's last seq and moves with every append, so it costs one
	// read whatever the log's length.
	LogSize(ctx context.Context, runID string) (int64, error)
	// CloseLog marks the log finished: later appends are refused. It is
	// fenced like an append (FailedPrecondition when epoch is not the run's
	// DriverEpoch), except that closing a closed log is a no-op that
	// returns nil whatever the epoch.
	CloseLog(ctx context.Context, runID string, epoch int64) error
	// LogClosed reports whether CloseLog has closed the log.
	LogClosed(ctx context.Context, runID string) (bool, error)
}
