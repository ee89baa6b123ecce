package testutil_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/d10ffeed/corral/internal/testutil"
)

// recorder is a testing.TB whose Fatalf records and ends the goroutine,
// so WaitFor's failures can be checked.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	panic(r)
}

// run calls WaitFor with r and returns what Fatalf recorded ("" if none).
func run(t *testing.T, ctx context.Context, cond func(context.Context) (bool, error)) (msg string) {
	r := &recorder{TB: t}
	defer func() {
		if v := recover(); v != nil && v != any(r) {
			panic(v)
		}
		msg = r.msg
	}()
	testutil.WaitFor(r, ctx, "the thing", time.Second, cond)
	return ""
}

// TestWaitFor: true on the third call returns after two intervals; an
// error fails at once; a condition never true fails at the guard, on the
// fake clock.
func TestWaitFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		start := time.Now()
		if msg := run(t, context.Background(), func(context.Context) (bool, error) { calls++; return calls == 3, nil }); msg != "" || calls != 3 || time.Since(start) != 2*time.Second {
			t.Errorf("true on the third call: %q after %d calls, %v", msg, calls, time.Since(start))
		}
		if msg := run(t, context.Background(), func(context.Context) (bool, error) { return false, errors.New("boom") }); !strings.Contains(msg, "boom") {
			t.Errorf("an error: %q", msg)
		}
		start = time.Now()
		if msg := run(t, context.Background(), func(context.Context) (bool, error) { return false, nil }); !strings.Contains(msg, "the thing") || time.Since(start) != testutil.WaitGuard {
			t.Errorf("never true: %q after %v", msg, time.Since(start))
		}
	})
}
