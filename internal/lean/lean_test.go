package lean

import (
	"runtime"
	"testing"
)

func TestReadOnlyMapping(t *testing.T) {
	const ino = 10282472
	for _, c := range []struct {
		name               string
		line               string
		start, end         uintptr
		wantOK, wantHeader bool
	}{
		{"code", "00400000-0135a000 r-xp 00000000 fe:00 10282472   /usr/bin/corral", 0x400000, 0x135a000, true, true},
		{"rodata", "0135a000-022fe000 r--p 00f5a000 fe:00 10282472   /usr/bin/corral", 0x135a000, 0x22fe000, true, true},
		{"deleted binary", "0135a000-022fe000 r--p 00f5a000 fe:00 10282472   /usr/bin/corral (deleted)", 0x135a000, 0x22fe000, true, true},
		{"data is written", "022fe000-023cc000 rw-p 01efe000 fe:00 10282472   /usr/bin/corral", 0, 0, false, true},
		{"shared", "00400000-0135a000 r-xs 00000000 fe:00 10282472   /usr/bin/corral", 0, 0, false, true},
		{"another file", "7f4d1bad3000-7f4d1bc29000 r-xp 00026000 fe:00 326269 /usr/lib/libc.so.6", 0, 0, false, true},
		{"anonymous", "3b2434000000-3b2434800000 r--p 00000000 00:00 0 ", 0, 0, false, true},
		{"field line", "Rss:               11688 kB", 0, 0, false, false},
		{"flags line", "VmFlags: rd ex mr mw me dw sd", 0, 0, false, false},
		{"reversed range", "0135a000-00400000 r--p 00f5a000 fe:00 10282472 /usr/bin/corral", 0, 0, false, false},
		{"garbage", "zz-yy r--p 0 0 1 /x", 0, 0, false, false},
		{"empty", "", 0, 0, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, e, ok, header := readOnlyMapping(c.line, ino)
			if ok != c.wantOK || header != c.wantHeader || s != c.start || e != c.end {
				t.Errorf("readOnlyMapping(%q) = %#x, %#x, %v, %v; want %#x, %#x, %v, %v", c.line, s, e, ok, header, c.start, c.end, c.wantOK, c.wantHeader)
			}
		})
	}
}

func FuzzReadOnlyMapping(f *testing.F) {
	f.Add("00400000-0135a000 r-xp 00000000 fe:00 7   /usr/bin/corral")
	f.Add("Anonymous:             0 kB")
	f.Fuzz(func(t *testing.T, line string) {
		s, e, ok, header := readOnlyMapping(line, 7)
		if ok && (!header || e <= s) {
			t.Fatalf("readOnlyMapping(%q) = %#x, %#x, ok without a valid header", line, s, e)
		}
	})
}

// rssFile is this process's file-backed resident memory in kB.
func rssFile(t *testing.T) int64 {
	t.Helper()
	n, err := StatusKB(0, "RssFile")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTrimKeepsTheProgramWhole trims the test binary itself, then runs
// code and reads data it had touched before (a map, a closure, a string
// table), which must come back unchanged from the file.
func TestTrimKeepsTheProgramWhole(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("trimming is linux-only; elsewhere Trim only frees the heap")
	}
	words := map[string]int{"journal": 7, "sandbox": 7, "corral": 6}
	sum := func() int {
		n := 0
		for w, l := range words {
			if len(w) != l {
				t.Fatalf("%q: len %d, want %d", w, len(w), l)
			}
			n += l
		}
		return n
	}
	before, resident := sum(), rssFile(t)
	advised := Trim()
	if advised <= 0 {
		t.Fatalf("Trim advised %d bytes; the test binary has read-only mappings", advised)
	}
	after := rssFile(t)
	if got := sum(); got != before {
		t.Fatalf("after Trim: sum %d, want %d", got, before)
	}
	if after >= resident {
		t.Errorf("file-backed RSS %d kB after Trim, %d kB before: nothing was given back", after, resident)
	}
	t.Logf("advised %d MB; file-backed RSS %d kB → %d kB", advised>>20, resident, after)
}
