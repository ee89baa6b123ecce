package journaltest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/sandbox"
)

// sink hashes what a read delivers, newlines put back after every line
// but a piece, and checks the pieces' form as it goes.
type sink struct {
	t        *testing.T
	maxLine  int
	h        hash.Hash
	bytes    int64 // data bytes delivered
	lines    int
	pieces   int
	lastEnd  int64
	peakHeap uint64
	onFirst  func()
	err      error
}

func newSink(t *testing.T, maxLine int) *sink {
	return &sink{t: t, maxLine: maxLine, h: sha256.New()}
}

func (k *sink) line(l journal.Line) error {
	if k.onFirst != nil {
		k.onFirst()
		k.onFirst = nil
	}
	if l.Diff != nil {
		return nil
	}
	if len(l.Data) > k.maxLine || (l.Partial && len(l.Data) != k.maxLine) {
		k.t.Errorf("a line of %d bytes (partial %v) with MaxLine %d", len(l.Data), l.Partial, k.maxLine)
	}
	if l.End <= k.lastEnd {
		k.t.Errorf("End %d after %d", l.End, k.lastEnd)
	}
	k.lastEnd = l.End
	k.h.Write(l.Data)
	k.bytes += int64(len(l.Data))
	if l.Partial {
		k.pieces++
	} else {
		k.h.Write([]byte("\n"))
		k.lines++
	}
	if (k.pieces+k.lines)%16 == 0 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		k.peakHeap = max(k.peakHeap, ms.HeapAlloc)
	}
	return nil
}

// holdUntilGone makes the read's first delivery wait until the wrapper
// is gone, and then 3 s more, so the read is far behind a finished agent
// (longer than a watchdog that stops the follower 2 s after the wrapper
// went). The verdict does not depend on these waits.
func holdUntilGone(t *testing.T, ctx context.Context, h sandbox.Handle, p journal.Paths, nonce string) func() {
	return func() {
		for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
			st, err := journal.Probe(ctx, h, p, nonce)
			if err == nil && st.Started && !st.Alive {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				t.Errorf("the agent did not finish: %+v %v", st, err)
				return
			}
		}
		time.Sleep(3 * time.Second)
	}
}

// testFlood: output written faster than any reader, then an exit, all
// reaches the reader, even a reader that is still far behind when the
// agent has long finished.
func (s *suite) testFlood(t *testing.T, st journal.Strategy) {
	n := s.h.floodBytes()
	ctx, h := s.sandbox(t)
	p, nonce := start(t, ctx, h, `yes 0123456789abcdefghij | head -c `+strconv.FormatInt(n, 10)+`; exit 3`)
	k := newSink(t, journal.DefaultMaxLine)
	k.onFirst = holdUntilGone(t, ctx, h, p, nonce)
	exit, err := reader(h, p, nonce, st).Read(ctx, 0, k.line)
	want := bytes.Repeat([]byte("0123456789abcdefghij\n"), int(n/21)+1)[:n]
	if want[len(want)-1] != '\n' {
		want = append(want, '\n') // the wrapper ends the last line
	}
	sum := sha256.Sum256(want)
	delivered := k.bytes + int64(k.lines) - int64(len(want)) + n
	t.Logf("bytes delivered %d of %d written (%d lines), exit %d, err %v", delivered, n, k.lines, exit.Code, err)
	if err != nil {
		t.Fatal(err)
	}
	if exit.Code != 3 || !bytes.Equal(k.h.Sum(nil), sum[:]) || delivered != n {
		t.Errorf("exit %d, hash equal %v, delivered %d of %d", exit.Code, bytes.Equal(k.h.Sum(nil), sum[:]), delivered, n)
	}
}

// testLongLine: one line of size bytes (of the byte fill), then an exit:
// it comes in MaxLine pieces, byte for byte.
func (s *suite) testLongLine(t *testing.T, st journal.Strategy, size int64, fill byte, code int) {
	ctx, h := s.sandbox(t)
	gen := `head -c ` + strconv.FormatInt(size, 10) + ` /dev/zero`
	if fill != 0 {
		gen += ` | tr '\000' '` + string(fill) + `'`
	}
	p, nonce := start(t, ctx, h, gen+`; exit `+strconv.Itoa(code))
	k := newSink(t, journal.DefaultMaxLine)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	exit, err := reader(h, p, nonce, st).Read(ctx, 0, k.line)
	want := sha256.New()
	want.Write(bytes.Repeat([]byte{fill}, int(size)))
	want.Write([]byte("\n"))
	t.Logf("bytes delivered %d of %d written, in %d pieces and %d line; heap %d MiB before, at most %d MiB during the read (the test process's, shared with parallel cases)", k.bytes, size, k.pieces, k.lines, before.HeapAlloc>>20, k.peakHeap>>20)
	if err != nil {
		t.Fatal(err)
	}
	wantPieces := int((size - 1) / journal.DefaultMaxLine)
	if exit.Code != code || k.bytes != size || k.lines != 1 || k.pieces != wantPieces || !bytes.Equal(k.h.Sum(nil), want.Sum(nil)) {
		t.Errorf("exit %d, %d bytes in %d pieces + %d lines (want %d pieces + 1), hash equal %v", exit.Code, k.bytes, k.pieces, k.lines, wantPieces, bytes.Equal(k.h.Sum(nil), want.Sum(nil)))
	}
}

// testFollowerKilled: the agent kills the reader's follower mid-stream:
// its shell (and watchdog) only, once, or its tail only, or both, three
// times.
// Nothing is lost and the run is not lost. With the poll strategy there is
// no follower to kill; the agent tries the same.
func (s *suite) testFollowerKilled(t *testing.T, st journal.Strategy, what string) {
	ctx, h := s.sandbox(t)
	// The patterns are assembled at run time so that the agent's own argv
	// does not match them. No pgrep: BusyBox images may lack it.
	// In follow mode the agent waits for each new follower to kill (the
	// test's context is the hang guard); a follower whose shell was killed
	// goes on streaming, and is not replaced, so that one is killed once.
	pats, rounds, kills := `"$SP" "$TP"`, 3, 6
	switch what {
	case "shell":
		pats, rounds, kills = `"$SP"`, 1, 1
	case "tail":
		pats, rounds, kills = `"$TP"`, 3, 3
	}
	wait := `[ -z "$(fresh "$pat")" ]`
	if st != journal.Follow && st != watched {
		wait, kills = "false", 0
	}
	script := `SP="*corral-""follow $J *" TP="tail"" -c * -f $J *"
findp() {
  head -c 65536 /proc/[0-9]*/cmdline 2>/dev/null | tr '\000' ' ' | while IFS= read -r l; do
    case $l in
    '==> /proc/'*) p=${l#'==> /proc/'}; p=${p%%/*} ;;
    $1) echo "$p" ;;
    esac
  done
}
fresh() {
  for q in $(findp "$1"); do case "$seen " in *" $q "*) ;; *) echo "$q" ;; esac; done
}
seen=
k=0
while [ $k -lt ` + strconv.Itoa(rounds) + ` ]; do
  i=0; while [ $i -lt 500 ]; do echo "line $k $i"; i=$((i+1)); done
  for pat in ` + pats + `; do
    while ` + wait + `; do sleep 0.05; done
    ok=; for q in $(fresh "$pat"); do kill "$q" 2>/dev/null && ok=1; seen="$seen $q"; done
    [ -n "$ok" ] && echo killed >&2
  done
  k=$((k+1))
done
echo last; exit 3`
	p, nonce := startAgent(t, ctx, h, func(p journal.Paths, _ string) sandbox.Command {
		return sandbox.Command{Shell: script, Env: map[string]string{"J": p.Journal}}
	})
	lines, exit, err := collect(t, ctx, reader(h, p, nonce, st), 0)
	var want []string
	for k := range rounds {
		for i := range 500 {
			want = append(want, fmt.Sprintf("line %d %d", k, i))
		}
	}
	want = append(want, "last")
	stderr, _ := journal.ErrTail(ctx, h, p, 4096)
	t.Logf("lines delivered %d of %d written, follower %s killed %d times, exit %d, err %v", len(lines), len(want), what, strings.Count(stderr, "killed"), exit.Code, err)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(texts(lines), "\n") != strings.Join(want, "\n") || exit.Code != 3 {
		t.Errorf("exit %d; lines differ", exit.Code)
	}
	// How many kills land depends on how the agent's scan meets the
	// reader's replacement followers; that nothing is lost is the verdict.
	// In follow mode at least one follower must have been killed, else
	// the case proved nothing.
	if n := strings.Count(stderr, "killed"); (kills > 0 && n == 0) || n > kills {
		t.Errorf("the agent killed %d followers, want 1 to %d", n, kills)
	}
}
