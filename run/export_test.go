package run

import (
	"context"
	"sync/atomic"

	"github.com/d10ffeed/corral/journal"
)

// pieceSize, when positive, makes drivers read the journal as a reader
// whose MaxLine is pieceSize would deliver it: longer lines in pieces.
var pieceSize atomic.Int64

func init() {
	orig := readJournal
	readJournal = func(ctx context.Context, rd *journal.Reader, fn func(journal.Line) error) (journal.Exit, error) {
		return orig(ctx, rd, func(l journal.Line) error {
			n := int(pieceSize.Load())
			if n <= 0 || l.Diff != nil || len(l.Data) <= n {
				return fn(l)
			}
			return splitLine(l, n, fn)
		})
	}
}

// splitLine delivers l as pieces of n bytes (the last one complete).
func splitLine(l journal.Line, n int, fn func(journal.Line) error) error {
	start := l.End - int64(len(l.Data)) - 1
	for i := 0; i < len(l.Data); i += n {
		j := min(i+n, len(l.Data))
		p := journal.Line{Data: l.Data[i:j], End: start + int64(j), Partial: j < len(l.Data)}
		if !p.Partial {
			p.End = l.End
		}
		if err := fn(p); err != nil {
			return err
		}
	}
	return nil
}

// SetPieceSize makes this process's drivers read journal lines longer than
// n bytes in pieces of n (0: whole lines), as a reader with that MaxLine
// would, and returns the previous setting.
func SetPieceSize(n int) int { return int(pieceSize.Swap(int64(n))) }

// MostLocalStarts is the most local starts that were under way at once.
func (r *Runner) MostLocalStarts() int {
	r.starting.mu.Lock()
	defer r.starting.mu.Unlock()
	return r.starting.max
}
