package harness

import (
	"strings"
	"testing"
)

func TestParseWarmCheck(t *testing.T) {
	type check struct {
		pid         int
		started, ok bool
	}
	for out, want := range map[string]check{"warm 42\n": {42, false, true}, "started 7\n": {7, true, true}, "busy\n": {}, "unsupported\n": {}} {
		pid, started, ok, err := ParseWarmCheck([]byte(out))
		if got := (check{pid, started, ok}); got != want || err != nil {
			t.Errorf("%q: %+v %v, want %+v", out, got, err, want)
		}
	}
	for _, out := range []string{"warm x\n", "warm -3\n"} {
		if _, _, ok, err := ParseWarmCheck([]byte(out)); ok || err == nil {
			t.Errorf("%q: ok %v err %v, want an error", out, ok, err)
		}
	}
}

// TestWarmDigest: a change of argv, environment or extra changes the
// digest; the map's order does not; no value shows in it.
func TestWarmDigest(t *testing.T) {
	base := WarmDigest([]string{"opencode", "serve"}, map[string]string{"A": "1", "KEY": "sk-secret"}, "x")
	same := WarmDigest([]string{"opencode", "serve"}, map[string]string{"KEY": "sk-secret", "A": "1"}, "x")
	if base != same || strings.Contains(base, "sk-secret") {
		t.Fatalf("digest %q vs %q", base, same)
	}
	for name, d := range map[string]string{
		"argv":  WarmDigest([]string{"opencode", "serve", "-v"}, map[string]string{"A": "1", "KEY": "sk-secret"}, "x"),
		"env":   WarmDigest([]string{"opencode", "serve"}, map[string]string{"A": "1", "KEY": "sk-other"}, "x"),
		"extra": WarmDigest([]string{"opencode", "serve"}, map[string]string{"A": "1", "KEY": "sk-secret"}, "y"),
		"split": WarmDigest([]string{"opencode serve"}, map[string]string{"A": "1", "KEY": "sk-secret"}, "x"),
	} {
		if d == base {
			t.Errorf("a change of %s keeps the digest", name)
		}
	}
}

func TestWarmOption(t *testing.T) {
	for v, want := range map[string]bool{"": false, "true": true, " 1 ": true, "false": false, "maybe": false} {
		if got := WarmOption(map[string]string{OptWarm: v}); got != want {
			t.Errorf("warm=%q: %v, want %v", v, got, want)
		}
	}
	if _, err := ParseWarmOption(map[string]string{OptWarm: "maybe"}); err == nil {
		t.Error("warm=maybe parsed")
	}
}
