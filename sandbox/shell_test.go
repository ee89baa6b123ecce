package sandbox_test

import (
	"fmt"
	"os/exec"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
)

func TestShellQuote(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", "''"},
		{"abc", "abc"},
		{"/usr/bin/x-y_z.1", "/usr/bin/x-y_z.1"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"$HOME", "'$HOME'"},
		{"=x", "'=x'"},
		{"-n", "-n"},
	} {
		if got := sandbox.ShellQuote(tt.in); got != tt.want {
			t.Errorf("ShellQuote(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// FuzzShellQuote checks, with the real sh, that a quoted value is read back
// as one word with the same bytes.
func FuzzShellQuote(f *testing.F) {
	if _, err := exec.LookPath("sh"); err != nil {
		f.Skip("no sh on PATH")
	}
	for _, s := range []string{"", "a b", "'", `"`, "$(touch /tmp/pwned)", "`id`", "\\", "\n", "*", "~", "a'b\"c", "-e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for i := 0; i < len(in); i++ {
			if in[i] == 0 {
				return // argv cannot carry NUL
			}
		}
		out, err := exec.Command("sh", "-c", "printf '%s' "+sandbox.ShellQuote(in)+" "+sandbox.ShellQuote("end")).Output()
		if err != nil {
			t.Fatalf("sh failed on %q: %v", in, err)
		}
		if string(out) != in+"end" {
			t.Fatalf("round trip of %q gave %q", in, out)
		}
	})
}

func ExampleShellJoin() {
	fmt.Println(sandbox.ShellJoin([]string{"git", "commit", "-m", "it's done"}))
	// Output: git commit -m 'it'\''s done'
}
