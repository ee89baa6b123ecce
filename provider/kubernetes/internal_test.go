package kubernetes

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/client-go/rest"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/execproc"
)

// runLauncher runs the launcher on the host's sh with env as its prelude
// and stdin after it, and returns what the command printed.
func runLauncher(t testing.TB, env []string, stdin string, argv ...string) string {
	t.Helper()
	spec := execproc.Spec{Argv: argv, Env: env, Dir: t.TempDir()}
	full := launchArgv(spec)
	cmd := exec.Command(full[0], full[1:]...)
	var in bytes.Buffer
	if len(env) > 0 {
		in.Write(envPrelude(env))
	}
	in.WriteString(stdin)
	cmd.Stdin = &in
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("launcher: %v: %s", err, out)
	}
	return string(out)
}

// TestLauncherEnv: hostile values reach the command byte for byte, and
// the command's stdin starts right after the prelude.
func TestLauncherEnv(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh on the host")
	}
	cases := []struct{ name, value string }{
		{"plain", "hello"},
		{"empty", ""},
		{"spaces", "  two  spaces  "},
		{"newlines", "line1\nline2\n\n"},
		{"quotes", `it's "quoted" \back\slash`},
		{"substitution", "$(touch /tmp/corral-pwned) `id` ${HOME}"},
		{"utf8", "grüße ✓"},
		{"control", "\x01\x1b[31m\t\r"},
		{"escape-lookalike", `\0101\n\c`},
		{"high-bytes", "\xff\xfe"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := runLauncher(t, []string{"A=1", "V=" + c.value}, "after-prelude\n",
				"sh", "-c", `printf '%s|' "$A" "$V"; cat`)
			want := "1|" + c.value + "|after-prelude\n"
			if got != want {
				t.Fatalf("got %q, want %q", got, want)
			}
		})
	}
}

// TestLauncherDir: the command runs in the directory given.
func TestLauncherDir(t *testing.T) {
	dir := t.TempDir()
	spec := execproc.Spec{Argv: []string{"pwd"}, Dir: dir}
	full := launchArgv(spec)
	out, err := exec.Command(full[0], full[1:]...).Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(out)) != dir {
		t.Fatalf("pwd %q, want %q", out, dir)
	}
}

// FuzzEnvPrelude: any value survives the prelude through the host's sh
// (NUL cannot be in an environment and is left out).
func FuzzEnvPrelude(f *testing.F) {
	for _, s := range []string{"", "x", "a\nb", `\\0`, "'\"$`", "\xff"} {
		f.Add(s)
	}
	if _, err := exec.LookPath("sh"); err != nil {
		f.Skip("no sh on the host")
	}
	f.Fuzz(func(t *testing.T, v string) {
		if strings.IndexByte(v, 0) >= 0 || len(v) > 4096 {
			t.Skip("NUL cannot be in an environment, and values over 4 KiB are beyond the prelude test")
		}
		got := runLauncher(t, []string{"V=" + v}, "", "sh", "-c", `printf '%s' "$V"`)
		if got != v {
			t.Fatalf("got %q (valid utf8 %v), want %q", got, utf8.ValidString(got), v)
		}
	})
}

// TestPodName: valid names are kept, others get a digest, always valid and
// distinct.
func TestPodName(t *testing.T) {
	cases := []struct{ id, want string }{
		{"abc", "abc"},
		{"run-1", "run-1"},
		{"Run_1", ""},
		{"thread/a:b", ""},
		{strings.Repeat("a", 64), ""},
		{"-x", ""},
		{"", ""},
	}
	seen := map[string]string{}
	for _, c := range cases {
		got := podName(c.id)
		if c.want != "" && got != c.want {
			t.Errorf("podName(%q) = %q, want %q", c.id, got, c.want)
		}
		if !validPodName.MatchString(got) {
			t.Errorf("podName(%q) = %q is not a valid pod name", c.id, got)
		}
		if prev, ok := seen[got]; ok {
			t.Errorf("podName(%q) = podName(%q) = %q", c.id, prev, got)
		}
		seen[got] = c.id
	}
}

// TestModeOptions: the mode options are checked without a cluster, and
// the SandboxTemplate's name follows the pod shape.
func TestModeOptions(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	for _, c := range []struct {
		name string
		opts Options
		ok   bool
	}{
		{"default is pods", Options{}, true},
		{"sandbox", Options{Mode: ModeSandbox, WarmPool: 3, Template: "mine"}, true},
		{"unknown mode", Options{Mode: "vm"}, false},
		{"warm pool in pods mode", Options{WarmPool: 1}, false},
		{"negative pool", Options{Mode: ModeSandbox, WarmPool: -1}, false},
		{"template in pods mode", Options{Template: "mine"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.opts.config = cfg
			_, err := New(c.opts)
			if c.ok != (err == nil) || err != nil && sandbox.CodeOf(err) != sandbox.InvalidArgument {
				t.Fatalf("New: %v (want ok %v, else InvalidArgument)", err, c.ok)
			}
		})
	}
	name := func(o Options) string {
		t.Helper()
		o.Mode, o.config = ModeSandbox, cfg
		p, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		n, _, err := p.templateName(false)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	a, b := name(Options{}), name(Options{})
	if a != b || !validPodName.MatchString(a) {
		t.Errorf("the same options name templates %q and %q", a, b)
	}
	if c := name(Options{Image: "other:1"}); c == a {
		t.Errorf("another image has the same template %q", c)
	}
	if c := name(Options{Template: "theirs"}); c != "theirs" {
		t.Errorf("Options.Template: got %q", c)
	}
}
