package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/store"
)

func TestParseApprovals(t *testing.T) {
	got, err := parseApprovals([]string{"opencode:command:curl *"}, []string{"opencode:command:rm -rf x"})
	if err != nil || len(got) != 2 || !got["opencode:command:curl *"] || got["opencode:command:rm -rf x"] {
		t.Errorf("got %v, %v", got, err)
	}
	if got, err := parseApprovals(nil, nil); got != nil || err != nil {
		t.Errorf("none: %v, %v", got, err)
	}
	for _, c := range [][2][]string{{{"a"}, {"a"}}, {{" "}, nil}, {nil, {""}}} {
		if _, err := parseApprovals(c[0], c[1]); err == nil {
			t.Errorf("parseApprovals(%q, %q): want an error", c[0], c[1])
		}
	}
}

func TestPrinterShowsApprovals(t *testing.T) {
	var out, errb strings.Builder
	p := &printer{stdout: &out, stderr: &errb}
	ev := event.CustomEvent(event.ApprovalRequested, event.Approval{ID: "opencode:command:curl *", Kind: "command", Target: "curl *"})
	if err := p.print(store.Event{Seq: 1, Data: ev.Marshal()}); err != nil {
		t.Fatal(err)
	}
	want := "corral: approval needed: command curl *\ncorral:   answer in the thread's next run: --approve 'opencode:command:curl *' (or --deny)\n"
	if errb.String() != want || out.Len() != 0 {
		t.Errorf("stderr %q, stdout %q\nwant stderr %q", errb.String(), out.String(), want)
	}
}

// TestRunRefusesApprovalsOption: approvals have one way in, --approve and
// --deny; "--option approvals=…" is refused with a message naming the
// option, whatever its value.
func TestRunRefusesApprovalsOption(t *testing.T) {
	for _, v := range []string{`{"a":true}`, "not json"} {
		_, errOut, code := cli(t, nil, "run", "--store", "sqlite:"+filepath.Join(t.TempDir(), "s.db"), "--option", "approvals="+v, "--", "true")
		if code == 0 || !strings.Contains(errOut, `option "approvals" is not accepted`) || !strings.Contains(errOut, "--approve") {
			t.Errorf("--option approvals=%s: exit %d, stderr %q", v, code, errOut)
		}
		t.Logf("--option approvals=%s: exit %d, %s", v, code, strings.TrimSpace(errOut))
	}
}
