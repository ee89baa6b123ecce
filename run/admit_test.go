package run_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/store"
)

// Runs started at once on the local provider start their agents at most
// MaxLocalStarts at a time, and every one still completes.
func TestMaxLocalStarts(t *testing.T) {
	const runs = 6
	for _, tc := range []struct {
		name  string
		bound int
		most  int // the most starts at once allowed
	}{
		{"one", 1, 1},
		{"three", 3, 3},
		{"unbounded", -1, runs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			r := e.runner(t, run.Options{MaxLocalStarts: tc.bound})
			c := ctx(t)
			var wg sync.WaitGroup
			got := make([][]string, runs)
			errs := make([]error, runs)
			for i := range runs {
				rec, err := r.Start(c, run.StartRequest{Definition: "d", Thread: fmt.Sprint("t", i), Harness: command.Name,
					Args: []string{"echo", fmt.Sprint(i)}})
				if err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					var evs []event.Event
					errs[i] = r.Follow(c, rec.ID, 0, func(se store.Event) error {
						ev, err := event.Unmarshal(se.Data)
						evs = append(evs, ev)
						return err
					})
					got[i] = lines(evs)
				}()
			}
			wg.Wait()
			for i, l := range got {
				if errs[i] != nil {
					t.Errorf("following run %d: %v", i, errs[i])
				}
				if len(l) != 1 || l[0] != fmt.Sprint(i) {
					t.Errorf("run %d printed %q, want [%d]", i, l, i)
				}
			}
			if most := r.MostLocalStarts(); tc.bound > 0 && (most < 1 || most > tc.most) {
				t.Errorf("%d local starts at once, want 1..%d", most, tc.most)
			}
		})
	}
}
