package journal

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
)

// frameAll feeds journal to a framer from offset from in chunks of the
// sizes sizes cycles through, and returns what it delivered. gone and size
// model the wrapper: once every byte is fed, decide runs with them.
func frameAll(t *testing.T, journal []byte, from int64, maxLine int, nonce string, sizes []int, gone bool) ([]Line, *Exit, *framer) {
	t.Helper()
	var lines []Line
	f := newFramer(from, maxLine, nonce, func(l Line) error {
		lines = append(lines, l)
		return nil
	})
	rest := journal[f.next():]
	for i := 0; len(rest) > 0; i++ {
		n := min(sizes[i%len(sizes)], len(rest))
		if err := f.feed(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	x, err := f.decide(gone, int64(len(journal)), true)
	if err != nil {
		t.Fatal(err)
	}
	return lines, x, f
}

func render(lines []Line) string {
	var b strings.Builder
	for _, l := range lines {
		switch {
		case l.Diff != nil:
			fmt.Fprintf(&b, "diff(%q)@%d|", l.Diff.Patch, l.End)
		case l.Partial:
			fmt.Fprintf(&b, "piece(%d:%.8q)@%d|", len(l.Data), l.Data, l.End)
		default:
			fmt.Fprintf(&b, "line(%d:%.8q)@%d|", len(l.Data), l.Data, l.End)
		}
	}
	return b.String()
}

const testMax = 256

func sampleJournal(nonce string) []byte {
	var j bytes.Buffer
	j.WriteString(`{"__start":42,"__t":7}` + "\n")
	j.WriteString("short\n\n")
	for _, n := range []int{testMax - 1, testMax, testMax + 1, 2 * testMax, 2*testMax + 1, 3*testMax + 17, 10 * testMax} {
		j.Write(bytes.Repeat([]byte{byte('a' + n%26)}, n))
		j.WriteByte('\n')
	}
	j.WriteString(`{"__diff":"not the wrapper's"}` + "\n")
	j.WriteString(`{"__diff":"` + strings.Repeat("d", 3*testMax) + `"}` + "\n") // held as a diff line might be, then cut
	j.Write(bytes.Repeat([]byte{0}, 5*testMax+3))
	j.WriteByte('\n')
	j.Write(EndLine(nonce))
	j.Write(DiffLine([]byte("the patch"), false, nonce))
	j.Write(SentinelLine(3, nonce))
	return j.Bytes()
}

// TestFramerPiecesWhateverTheChunking: the lines, the pieces and their
// offsets do not depend on how the bytes arrive, and a long line comes in
// pieces of exactly MaxLine bytes, the last one not Partial.
func TestFramerPiecesWhateverTheChunking(t *testing.T) {
	nonce := NewNonce()
	j := sampleJournal(nonce)
	want, wantExit, _ := frameAll(t, j, 0, testMax, nonce, []int{len(j)}, true)
	if wantExit == nil || wantExit.Code != 3 || wantExit.End != int64(len(j)) {
		t.Fatalf("exit %+v", wantExit)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	chunkings := [][]int{{1}, {2}, {7}, {testMax}, {testMax + 1}, {64 << 10}}
	for range 20 {
		var sizes []int
		for range 50 {
			sizes = append(sizes, 1+rng.IntN(3*testMax))
		}
		chunkings = append(chunkings, sizes)
	}
	for _, sizes := range chunkings {
		got, x, _ := frameAll(t, j, 0, testMax, nonce, sizes, true)
		if render(got) != render(want) || *x != *wantExit {
			t.Fatalf("chunks %v:\n got %s %+v\nwant %s %+v", sizes[:min(5, len(sizes))], render(got), x, render(want), wantExit)
		}
	}
	// Every piece but a line's last is exactly MaxLine bytes; the bytes
	// delivered, newlines put back, are the journal's.
	var back bytes.Buffer
	back.WriteString(`{"__start":42,"__t":7}` + "\n")
	prev := int64(len(`{"__start":42,"__t":7}` + "\n"))
	for _, l := range want {
		if l.Diff != nil {
			if string(l.Diff.Patch) != "the patch" {
				t.Errorf("diff %q", l.Diff.Patch)
			}
			continue
		}
		if l.Partial && len(l.Data) != testMax {
			t.Errorf("a piece of %d bytes, want %d", len(l.Data), testMax)
		}
		if len(l.Data) > testMax {
			t.Errorf("a line of %d bytes delivered whole", len(l.Data))
		}
		back.Write(l.Data)
		if !l.Partial {
			back.WriteByte('\n')
		}
		if l.End != int64(back.Len()) || l.End <= prev {
			t.Errorf("End %d, want %d", l.End, back.Len())
		}
		prev = l.End
	}
	tail := len(EndLine(nonce)) + len(DiffLine([]byte("the patch"), false, nonce)) + len(SentinelLine(3, nonce))
	if !bytes.Equal(back.Bytes(), j[:len(j)-tail]) {
		t.Error("the delivered bytes are not the journal's")
	}
}

// TestFramerResumeAtAnyEnd: a read resumed at the End of any line or piece
// delivers exactly what the first read delivered after it.
func TestFramerResumeAtAnyEnd(t *testing.T) {
	nonce := NewNonce()
	j := sampleJournal(nonce)
	all, _, _ := frameAll(t, j, 0, testMax, nonce, []int{97}, true)
	for i, l := range all {
		if l.Diff != nil {
			continue
		}
		got, x, _ := frameAll(t, j, l.End, testMax, nonce, []int{13}, true)
		if render(got) != render(all[i+1:]) || x == nil || x.Code != 3 {
			t.Fatalf("from %d:\n got %s\nwant %s", l.End, render(got), render(all[i+1:]))
		}
	}
}

// TestFramerMemoryBounded: a 50 MB line, fed in 64 KiB chunks, keeps the
// framer's buffer within MaxLine plus a few chunks, and costs one pass.
func TestFramerMemoryBounded(t *testing.T) {
	const maxLine, chunk, total = 1 << 20, 64 << 10, 50_000_000
	var pieces, delivered int
	f := newFramer(0, maxLine, NewNonce(), func(l Line) error {
		delivered += len(l.Data)
		pieces++
		if l.Partial != (delivered < total) || len(l.Data) > maxLine {
			t.Fatalf("piece %d: %d bytes, partial %v", pieces, len(l.Data), l.Partial)
		}
		return nil
	})
	b := bytes.Repeat([]byte{'x'}, chunk)
	maxCap := 0
	for fed := 0; fed < total; fed += chunk {
		if err := f.feed(b[:min(chunk, total-fed)]); err != nil {
			t.Fatal(err)
		}
		maxCap = max(maxCap, cap(f.buf))
	}
	if err := f.feed([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	t.Logf("bytes delivered %d of %d written, %d pieces, buffer capacity at most %d", delivered, total, pieces, maxCap)
	if delivered != total || pieces != (total+maxLine-1)/maxLine {
		t.Errorf("delivered %d bytes in %d pieces", delivered, pieces)
	}
	if maxCap > 2*(maxLine+2*chunk) {
		t.Errorf("buffer grew to %d bytes for a %d-byte line", maxCap, total)
	}
}

// TestFramerForgedLines: lines that carry the nonce are never delivered;
// the exit is only the last line, once the wrapper is gone; the diff only
// between the end line and that exit.
func TestFramerForgedLines(t *testing.T) {
	n := NewNonce()
	start := `{"__start":42,"__t":7}` + "\n"
	old := `{"__start":42}` + "\n"
	s := func(c int) string { return string(SentinelLine(c, n)) }
	end := string(EndLine(n))
	d := func(p string) string { return string(DiffLine([]byte(p), false, n)) }
	for _, tt := range []struct {
		name    string
		journal string
		gone    bool
		lines   string // the data lines, joined by |; diff as D(patch)
		exit    int    // -1: no exit
	}{
		{"real", start + "a\n" + end + d("p") + s(7), true, "a|D(p)", 7},
		{"real, no diff", start + "a\n" + end + s(7), true, "a", 7},
		{"wrapper still running", start + "a\n" + end + s(7), false, "a", -1},
		{"forged exit then more output", start + "a\n" + s(0) + "b\n" + end + s(7), true, "a|b", 7},
		{"forged exit then the real one at once", start + "a\n" + s(0) + end + s(7), true, "a", 7},
		{"forged exit last, wrapper running", start + "a\n" + s(0), false, "a", -1},
		{"bytes after the exit", start + "a\n" + end + s(7) + "late", true, "a", -1},
		{"a line after the exit", start + "a\n" + end + s(0) + "late\n", true, "a|late", -1},
		{"forged diff mid-output", start + d("forged") + "a\n" + end + s(0), true, "a", 0},
		{"forged diff just before the end line", start + "a\n" + d("forged") + end + s(0), true, "a", 0},
		{"forged end and diff, no real diff", start + "a\n" + end + d("forged") + "b\n" + end + s(0), true, "a|b", 0},
		{"forged end, diff and exit before the real ones", start + "a\n" + end + d("forged") + s(9) + end + d("real") + s(0), true, "a|D(real)", 0},
		{"forged diff right before the real exit, no end line", start + "a\n" + end + "b\n" + d("forged") + s(0), true, "a|b", 0},
		{"old journal: diff then exit", old + "a\n" + d("p") + s(3), true, "a|D(p)", 3},
		{"nonce in a line of no wrapper form", start + "x " + n + " y\n" + "a\n" + end + s(1), true, "a", 1},
		{"many forged exits", start + strings.Repeat(s(0), 100) + "a\n" + end + s(5), true, "a", 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, sizes := range [][]int{{len(tt.journal)}, {1}, {5}} {
				lines, x, _ := frameAll(t, []byte(tt.journal), 0, testMax, n, sizes, tt.gone)
				var got []string
				for _, l := range lines {
					if strings.Contains(string(l.Data), n) {
						t.Errorf("delivered the nonce: %q", l.Data)
					}
					if l.Diff != nil {
						got = append(got, "D("+string(l.Diff.Patch)+")")
					} else {
						got = append(got, string(l.Data))
					}
				}
				code := -1
				if x != nil {
					code = x.Code
				}
				if strings.Join(got, "|") != tt.lines || code != tt.exit {
					t.Errorf("chunks %v: lines %q exit %d; want %q exit %d", sizes, got, code, tt.lines, tt.exit)
				}
			}
		})
	}
}

// TestFramerWrapperNewline: the wrapper writes a newline before its end
// line whatever the agent's last byte (endLine); the empty line that makes
// after output ending with a newline is the wrapper's and is dropped, any
// other empty line is delivered, in order, at its own offset.
func TestFramerWrapperNewline(t *testing.T) {
	n := NewNonce()
	start := `{"__start":42,"__t":7}` + "\n"
	end := "\n" + string(EndLine(n)) // as the wrapper writes it
	s := func(c int) string { return string(SentinelLine(c, n)) }
	for _, tt := range []struct {
		name, journal string
		gone          bool
		lines         string // line data, joined by |, each @ its End
		exit          int    // -1: no exit
	}{
		{"terminated output", start + "hi\n" + end + s(0), true, "hi@26", 0},
		{"unterminated output", start + "hi" + end + s(0), true, "hi@26", 0},
		{"no output", start + end + s(0), true, "", 0},
		{"a trailing empty line of the agent", start + "hi\n\n" + end + s(0), true, "hi@26|@27", 0},
		{"empty lines inside the output", start + "a\n\n\nb\n" + end + s(2), true, "a@25|@26|@27|b@29", 2},
		{"an empty line before a forged line", start + "a\n\nx" + n + "\n" + end + s(0), true, "a@25|@26", 0},
		{"an empty line before a forged exit", start + "a\n\n" + s(9) + "b\n" + end + s(0), true, "a@25|@26|b@" + fmt.Sprint(26+len(s(9))+2), 0},
		{"an empty line before a long line", start + "\n" + strings.Repeat("x", 2*testMax+1) + "\n" + end + s(0), true, "@24|x*256@280|x*256@536|x@538", 0},
		{"an empty line last, wrapper running", start + "a\n\n", false, "a@25", -1},
		// A journal of an older wrapper (a newline only after an
		// unterminated line, an end line without "__nl") keeps the agent's
		// empty line right before its end line.
		{"older wrapper, trailing empty line", start + "a\n\n" + `{"__end":"` + n + `"}` + "\n" + s(0), true, "a@25|@26", 0},
		{"older wrapper, terminated output", start + "a\n" + `{"__end":"` + n + `"}` + "\n" + s(0), true, "a@25", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, sizes := range [][]int{{len(tt.journal)}, {1}, {3}} {
				lines, x, _ := frameAll(t, []byte(tt.journal), 0, testMax, n, sizes, tt.gone)
				var got []string
				for _, l := range lines {
					d := string(l.Data)
					if len(d) > 8 {
						d = fmt.Sprintf("%c*%d", d[0], len(d))
					}
					got = append(got, fmt.Sprintf("%s@%d", d, l.End))
				}
				code := -1
				if x != nil {
					code = x.Code
				}
				if strings.Join(got, "|") != tt.lines || code != tt.exit {
					t.Errorf("chunks %v: lines %q exit %d; want %q exit %d", sizes, got, code, tt.lines, tt.exit)
				}
			}
		})
	}
}

// TestFramerDecideNeedsEverything: no exit while bytes the journal had
// when the wrapper was found gone are still unread.
func TestFramerDecideNeedsEverything(t *testing.T) {
	n := NewNonce()
	j := []byte(`{"__start":42,"__t":7}` + "\n" + "a\n" + string(EndLine(n)) + string(SentinelLine(0, n)))
	f := newFramer(0, testMax, n, func(Line) error { return nil })
	if err := f.feed(j); err != nil {
		t.Fatal(err)
	}
	if x, _ := f.decide(true, int64(len(j))+1, true); x != nil {
		t.Errorf("decided %+v with a byte unread", x)
	}
	if x, _ := f.decide(true, int64(len(j)), true); x == nil || x.Code != 0 {
		t.Errorf("no exit once everything is read: %+v", x)
	}
}

// TestFindExit: Probe's rule, the sentinel as the last line only.
func TestFindExit(t *testing.T) {
	n := NewNonce()
	for _, tt := range []struct {
		data string
		code int
		ok   bool
	}{
		{"a\n" + string(SentinelLine(4, n)), 4, true},
		{string(SentinelLine(4, n)), 4, true},
		{string(SentinelLine(0, n)) + "more\n", 0, false},
		{string(SentinelLine(0, n)) + "x", 0, false},
		{strings.TrimSuffix(string(SentinelLine(0, n)), "\n"), 0, false},
		{"a\n", 0, false},
	} {
		code, ok := FindExit([]byte(tt.data), n)
		if code != tt.code || ok != tt.ok {
			t.Errorf("FindExit(%q) = %d, %v; want %d, %v", tt.data, code, ok, tt.code, tt.ok)
		}
	}
}

// TestCommandArgvLayout: aliveFn finds a wrapper by the argv Command lays
// out ("corral-journal", the journal's directory, the journal in a row).
func TestCommandArgvLayout(t *testing.T) {
	p, err := PathsFor("", "layout")
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := Command(Spec{Paths: p, Nonce: NewNonce(), Agent: sandbox.Command{Shell: "true"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	a := cmd.Args
	if len(a) < 6 || a[3] != "corral-journal" || a[4] != p.Dir || a[5] != p.Journal {
		t.Errorf("argv %q: aliveFn looks for corral-journal, %s, %s as argv[3:6]", a[:min(6, len(a))], p.Dir, p.Journal)
	}
}

// TestCommandDiffGate: a diff gate travels as the diff argument
// ("gate=PATH", cleaned); one that is not an absolute path is refused;
// without Diff it is ignored.
func TestCommandDiffGate(t *testing.T) {
	p, err := PathsFor("", "gate")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		diff     bool
		gate     string
		want     string // argv[9], the diff argument
		wantCode sandbox.Code
	}{
		{"no gate", true, "", "diff", sandbox.OK},
		{"gate", true, "/tmp/k/../k/gate", "gate=/tmp/k/gate", sandbox.OK},
		{"gate without diff", false, "/tmp/k/gate", "", sandbox.OK},
		{"relative", true, "k/gate", "", sandbox.InvalidArgument},
		{"newline", true, "/tmp/k\ngate", "", sandbox.InvalidArgument},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd, err := Command(Spec{Paths: p, Nonce: NewNonce(), Agent: sandbox.Command{Shell: "true"}, Diff: tt.diff, DiffGate: tt.gate}, true)
			if code := sandbox.CodeOf(err); code != tt.wantCode {
				t.Fatalf("Command: %v (code %v), want code %v", err, code, tt.wantCode)
			}
			if err == nil && cmd.Args[9] != tt.want {
				t.Errorf("the diff argument is %q, want %q", cmd.Args[9], tt.want)
			}
		})
	}
}

// BenchmarkFramer frames 64 MiB per op in 64 KiB chunks, as lines of
// 1 KiB, 1 MiB or one line of 64 MiB: the throughput is the same, so the
// cost is linear whatever the line length.
func BenchmarkFramer(b *testing.B) {
	const total, chunkLen = 64 << 20, 64 << 10
	for _, lineLen := range []int{1 << 10, 1 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("line=%dKiB", lineLen>>10), func(b *testing.B) {
			data := bytes.Repeat([]byte{'x'}, total)
			for i := lineLen - 1; i < total; i += lineLen {
				data[i] = '\n'
			}
			b.SetBytes(total)
			for b.Loop() {
				f := newFramer(0, DefaultMaxLine, "", func(Line) error { return nil })
				for off := 0; off < total; off += chunkLen {
					_ = f.feed(data[off : off+chunkLen])
				}
			}
		})
	}
}

// TestParseStartLine: both forms of the start line are read; anything
// else is not a start line.
func TestParseStartLine(t *testing.T) {
	for _, tt := range []struct {
		line string
		want StartRecord
		ok   bool
	}{
		{`{"__start":123,"__t":456}`, StartRecord{PID: 123, StartTime: 456, Current: true}, true},
		{`{"__start":123,"__t":0}`, StartRecord{PID: 123, Current: true}, true},
		{`{"__start":123}`, StartRecord{PID: 123}, true},
		{`{"__start":0}`, StartRecord{}, false},
		{`{"__start":"1"}`, StartRecord{}, false},
		{`{"__t":1,"__start":2}`, StartRecord{}, false},
		{`hello`, StartRecord{}, false},
	} {
		got, ok := ParseStartLine([]byte(tt.line))
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseStartLine(%q) = %+v, %v; want %+v, %v", tt.line, got, ok, tt.want, tt.ok)
		}
		if pid, ok := ParseStart([]byte(tt.line)); pid != tt.want.PID || ok != tt.ok {
			t.Errorf("ParseStart(%q) = %d, %v", tt.line, pid, ok)
		}
	}
}
