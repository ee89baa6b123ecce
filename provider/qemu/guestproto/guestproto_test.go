package guestproto

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func frames(t testing.TB, ms ...*Msg) []byte {
	t.Helper()
	var b []byte
	for _, m := range ms {
		f, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, f...)
	}
	return b
}

func TestReaderResyncs(t *testing.T) {
	a := &Msg{T: Output, Session: 7, ID: 1, FD: 1, Data: []byte("hi")}
	b := &Msg{T: Exit, Session: 7, ID: 1, Code: 3}
	whole := frames(t, a)
	tests := []struct {
		name string
		in   []byte
		want []string
	}{
		{"clean", frames(t, a, b), []string{Output, Exit}},
		{"garbage before", append([]byte("noise\xC0RG"), frames(t, b)...), []string{Exit}},
		{"torn frame tail", append(whole[5:], frames(t, b)...), []string{Exit}},
		{"oversized length", append([]byte{0xC0, 'R', 'G', 1, 0xff, 0xff, 0xff, 0xff}, frames(t, b)...), []string{Exit}},
		{"bad json", append(append(append([]byte{}, magic[:]...), 0, 0, 0, 2, '{', '['), frames(t, b)...), []string{Exit}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(bytes.NewReader(tt.in))
			var got []string
			for {
				m, err := r.Read()
				if err != nil {
					if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
						t.Fatal(err)
					}
					break
				}
				got = append(got, m.T)
			}
			if len(got) != len(tt.want) || (len(got) > 0 && got[len(got)-1] != tt.want[len(tt.want)-1]) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// FuzzReader: any byte stream ends in an error, never a panic or a hang,
// and a valid frame after arbitrary garbage is still delivered unless the
// garbage's last bytes start a frame that swallows it.
func FuzzReader(f *testing.F) {
	f.Add([]byte("x"))
	f.Add(frames(f, &Msg{T: Hello, Session: 1}))
	f.Add([]byte{0xC0, 'R', 'G', 1, 0, 0, 0, 5, 'n', 'u', 'l', 'l', ' '})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in))
		for i := 0; i <= len(in); i++ {
			if _, err := r.Read(); err != nil {
				return
			}
		}
		t.Fatalf("more messages than input bytes")
	})
}
