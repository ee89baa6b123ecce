package execproc

import (
	"bytes"
	"testing"
	"testing/synctest"
)

func TestCtlWriter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []string
		line   string
		rest   string
	}{
		{"one write", []string{"P12\nerr\n"}, "P12", "err\n"},
		{"split", []string{"P", "1", "2\ne", "rr"}, "P12", "err"},
		{"only the line", []string{"P7\n"}, "P7", ""},
		{"no newline at end", []string{"P7"}, "P7", ""},
		{"not a control line", []string{"OCI runtime exec failed: something long\n"}, "", "OCI runtime exec failed: something long\n"},
		{"escape", []string{"X\n"}, "X", ""},
	} {
		var out bytes.Buffer
		var got []string
		c := &ctlWriter{w: &out, on: func(s string) { got = append(got, s) }}
		for _, w := range tc.writes {
			if n, err := c.Write([]byte(w)); err != nil || n != len(w) {
				t.Fatalf("%s: Write = %d, %v", tc.name, n, err)
			}
		}
		c.finish()
		line := tc.line
		if tc.name == "no newline at end" {
			// The stream ended inside the line: it is passed on as output.
			line, tc.rest = "", "P7"
		}
		if len(got) != 1 || got[0] != line || out.String() != tc.rest {
			t.Errorf("%s: control %q, rest %q; want %q, %q", tc.name, got, out.String(), line, tc.rest)
		}
	}
}

func TestCapBuf(t *testing.T) {
	c := &capBuf{limit: 5}
	for _, w := range []string{"abc", "def", "gh"} {
		if n, _ := c.Write([]byte(w)); n != len(w) {
			t.Fatalf("Write returned %d", n)
		}
	}
	if c.buf.String() != "abcde" || !c.truncated {
		t.Errorf("capBuf = %q truncated %v", c.buf.String(), c.truncated)
	}
}

// TestBufPipeBounded runs in a synctest bubble: synctest.Wait returns once
// the writer is blocked for good, so "it waits" and "a read frees it" are
// exact, not guesses over a 100ms window.
func TestBufPipeBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBufPipe()
		b.limit = 8
		wrote := make(chan struct{})
		go func() {
			_, _ = b.Write([]byte("12345678")) // fills it
			_, _ = b.Write([]byte("9"))        // waits for a read
			close(wrote)
		}()
		synctest.Wait()
		select {
		case <-wrote:
			t.Fatal("a write past the limit did not wait for the reader")
		default:
		}
		buf := make([]byte, 4)
		if n, _ := b.Read(buf); string(buf[:n]) != "1234" {
			t.Fatalf("read %q", buf[:n])
		}
		synctest.Wait()
		select {
		case <-wrote:
		default:
			t.Fatal("a read did not make room for the writer")
		}

		// Close: the writer no longer waits, and what it writes is dropped.
		c := newBufPipe()
		c.limit = 1
		_, _ = c.Write([]byte("x"))
		done := make(chan struct{})
		go func() {
			_, _ = c.Write([]byte("y"))
			close(done)
		}()
		synctest.Wait()
		_ = c.Close()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Close did not release the writer")
		}
		if n, err := c.Write([]byte("zz")); n != 2 || err != nil {
			t.Errorf("write after Close = %d, %v", n, err)
		}
		c.closeWithError(nil)
		if _, err := c.Read(buf); err == nil {
			t.Error("a read after Close must fail")
		}
	})
}
