package journal_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/sandbox"
)

// TestConformanceLocalSh runs the journal suite on the local provider with
// the wrapper under the host's sh (local.ScriptShellOff), the path of a
// host without a static BusyBox; TestConformanceLocal covers the BusyBox.
func TestConformanceLocalSh(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the suite runs under BusyBox in TestConformanceLocal")
	}
	p, err := local.New(local.Options{BaseDir: t.TempDir(), ScriptShell: local.ScriptShellOff})
	if err != nil {
		t.Fatal(err)
	}
	journaltest.Run(t, journaltest.Harness{Provider: p})
}

// TestScriptShell: on a host with a static BusyBox the local provider runs
// the wrapper under it, yet the agent runs the host's own programs: an
// agent named "grep" or "sh" is GNU grep and the host's sh, never the
// BusyBox applet of that name; a program that does not resolve runs under
// sh as before (exit 127); a bare name is refused by Command once a shell
// is set.
func TestScriptShell(t *testing.T) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		testutil.Unavailable(t, "no busybox on PATH (Debian: busybox-static)")
	}
	gnu, err := exec.Command("grep", "--version").Output()
	if err != nil || !strings.Contains(string(gnu), "GNU grep") {
		t.Skipf("the host's grep is not GNU grep (%v): nothing tells it from BusyBox's", err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		shell  string
		wantBB bool
	}{{"auto", local.ScriptShellAuto, true}, {"path", bb, true}, {"off", local.ScriptShellOff, false}, {"dynamic", "/bin/sh", false}} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := local.New(local.Options{BaseDir: t.TempDir(), ScriptShell: tc.shell})
			if err != nil {
				t.Fatal(err)
			}
			h, err := p.Create(ctx, sandbox.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = h.Destroy(context.Background()) })
			var ss sandbox.ScriptShell
			got := sandbox.As(h, &ss) && ss.ScriptShell() != nil
			if got != tc.wantBB {
				t.Fatalf("script shell %v, want %v", got, tc.wantBB)
			}
			for _, c := range []struct {
				agent sandbox.Command
				want  string
				code  int
			}{
				{sandbox.Command{Args: []string{"grep", "--version"}}, "GNU grep", 0},
				{sandbox.Command{Shell: "grep --version | head -n 1; echo \"$0\""}, "GNU grep", 0},
				{sandbox.Command{Args: []string{"no-such-program-corral"}}, "", 127},
			} {
				out, code := journalRun(t, h, c.agent)
				if !strings.Contains(out, c.want) || code != c.code {
					t.Errorf("%s: exit %d, output %q; want %d with %q", c.agent, code, out, c.code, c.want)
				}
			}
		})
	}
	_, err = journal.Command(journal.Spec{Nonce: journal.NewNonce(), Agent: sandbox.Command{Args: []string{"grep"}}, Shell: []string{bb, "sh"}}, true)
	if sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("Command with a shell and a bare program: %v, want InvalidArgument", err)
	}
}

// journalRun runs agent journaled in h and returns its output lines and
// exit code.
func journalRun(t *testing.T, h sandbox.Handle, agent sandbox.Command) (string, int) {
	t.Helper()
	ctx := t.Context()
	paths, err := journal.PathsFor("", journal.NewNonce()[:12])
	if err != nil {
		t.Fatal(err)
	}
	nonce := journal.NewNonce()
	exited, err := journal.StartWatch(ctx, h, journal.Spec{Paths: paths, Nonce: nonce, Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rd := &journal.Reader{Handle: h, Paths: paths, Nonce: nonce, Exited: exited}
	x, err := rd.Read(ctx, 0, func(l journal.Line) error {
		out.Write(l.Data)
		out.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), x.Code
}
