package journal

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// TestScopeAbove checks cs_above, the patterns the end-of-run escape check
// reads environments by: together they match a pid exactly when it is
// above the wrapper's, for wrapper pids of every length and digit.
func TestScopeAbove(t *testing.T) {
	ns := []int{1, 2, 8, 9, 10, 19, 90, 99, 100, 300, 1234, 1999, 4000, 12345, 29999, 32767, 99999, 4194303}
	var xs []int
	for _, n := range ns {
		xs = append(xs, n-1, n, n+1, n*10, n*10+9, n/10)
	}
	xs = append(xs, 0, 5, 98, 101, 9999999, 4194304, 12399, 13000)
	var probe strings.Builder
	probe.WriteString("set -f\n")
	for _, n := range ns {
		fmt.Fprintf(&probe, "cs_above %d; set -- $cs_gl; for x in", n)
		for _, x := range xs {
			fmt.Fprintf(&probe, " %d", x)
		}
		fmt.Fprintf(&probe, "; do m=0; for p in \"$@\"; do p=${p#/proc/}; p=${p%%/environ}; case $x in $p) m=1 ;; esac; done; printf '%%s ' \"%d:$x:$m\"; done\n", n)
	}
	for _, sh := range shells(t) {
		out := runSnippet(t, sh, scopeFns+probe.String())
		got := 0
		for _, f := range strings.Fields(out) {
			parts := strings.Split(f, ":")
			if len(parts) != 3 {
				t.Fatalf("%v: bad output %q", sh, f)
			}
			n, _ := strconv.Atoi(parts[0])
			x, _ := strconv.Atoi(parts[1])
			if want := x > n; (parts[2] == "1") != want {
				t.Errorf("%v: cs_above %d matches %d: %s, want %v", sh, n, x, parts[2], want)
			}
			got++
		}
		if got != len(ns)*len(xs) {
			t.Fatalf("%v: %d answers, want %d: %q", sh, got, len(ns)*len(xs), out)
		}
	}
}
