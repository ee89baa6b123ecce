package opencode_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness/opencode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/sandbox"
)

var serverMode = map[string]string{opencode.OptMode: opencode.ModeServer}

// TestRealOpenCodeServer runs server mode through the runner: the shell
// call with its command and result, the final text as several deltas,
// file.changed, and the session resumed by the thread's next run.
func TestRealOpenCodeServer(t *testing.T) {
	const final = "done: made.txt now holds hello, as you asked."
	script := fakemodel.RunCommandThenSay("echo hello > made.txt", final)
	script.ChunkSize = 8
	f := newFixture(t, script, nil)
	ctx := testCtx(t)
	evs := f.run(t, ctx, "t", "make the file", serverMode)
	s := summarize(t, evs)
	if s.last.Type != event.RunFinished {
		t.Fatalf("last event %s %s, want RUN_FINISHED", s.last.Type, s.last.Message)
	}
	if s.command != "echo hello > made.txt" {
		t.Errorf("tool call command %q", s.command)
	}
	var res struct{ ExitCode *int }
	if s.isError || json.Unmarshal([]byte(s.result), &res) != nil || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Errorf("tool result %q (error %v), want exit code 0", s.result, s.isError)
	}
	if s.text != final {
		t.Errorf("final text %q, want %q", s.text, final)
	}
	deltas := 0
	for _, e := range evs {
		if e.Type == event.TextMessageContent {
			deltas++
		}
	}
	if deltas < 2 {
		t.Errorf("the final text came in %d TEXT_MESSAGE_CONTENT events, want live deltas", deltas)
	}
	if len(s.files) != 1 || s.files[0] != "made.txt" {
		t.Errorf("file.changed files %q, want made.txt", s.files)
	}
	if s.session == "" {
		t.Fatal("no session.started")
	}

	s2 := summarize(t, f.run(t, ctx, "t", "and again", serverMode))
	if s2.last.Type != event.RunFinished || s2.session != s.session {
		t.Errorf("resumed run: last %s %s, session %q want %q", s2.last.Type, s2.last.Message, s2.session, s.session)
	}
	reqs := f.srv.ModelRequests()
	if body := string(reqs[len(reqs)-1].Body); !strings.Contains(body, "make the file") || !strings.Contains(body, "and again") {
		t.Error("the resumed run's model request does not carry the earlier conversation")
	}
}

// TestRealOpenCodeServerApproval: the policy asks for the command; the
// client rejects it, the command does not run, approval.requested names
// it. Approved, it runs.
func TestRealOpenCodeServerApproval(t *testing.T) {
	policy := &sandbox.Policy{Default: sandbox.Allow, Commands: sandbox.CommandRules{Ask: []string{"echo *"}}}
	f := newFixture(t, fakemodel.RunCommandThenSay("echo hello > made.txt", "done"), policy)
	ctx := testCtx(t)
	s := summarize(t, f.run(t, ctx, "t", "make the file", serverMode))
	want := sandbox.ApprovalID(opencode.Name, sandbox.ApproveCommand, "echo hello > made.txt")
	if s.approval == nil || s.approval.ID != want {
		t.Fatalf("approval %+v, want id %q", s.approval, want)
	}
	if !s.isError || s.command != "echo hello > made.txt" || len(s.files) != 0 {
		t.Errorf("the asked command ran: result %q error %v files %q", s.result, s.isError, s.files)
	}

	s = summarize(t, f.runApproved(t, ctx, "t2", "make the file", serverMode, map[string]bool{want: true}))
	if s.approval != nil || s.isError || s.last.Type != event.RunFinished || len(s.files) != 1 || s.files[0] != "made.txt" {
		t.Errorf("approved run: approval %+v, result %q error %v, files %q, last %s", s.approval, s.result, s.isError, s.files, s.last.Type)
	}
}

// TestRealOpenCodeServerDenied: a deny rule refuses the command; the model
// is told and goes on, no approval is requested.
func TestRealOpenCodeServerDenied(t *testing.T) {
	policy := &sandbox.Policy{Default: sandbox.Allow, Commands: sandbox.CommandRules{Deny: []string{"rm *"}}}
	f := newFixture(t, fakemodel.RunCommandThenSay("rm README.md", "not allowed"), policy)
	s := summarize(t, f.run(t, testCtx(t), "t", "remove the readme", serverMode))
	if !s.isError || s.approval != nil || s.command != "rm README.md" {
		t.Errorf("denied command: result %q error %v approval %+v", s.result, s.isError, s.approval)
	}
	if s.last.Type != event.RunFinished || s.text != "not allowed" || len(s.files) != 0 {
		t.Errorf("last %s %s, text %q files %q", s.last.Type, s.last.Message, s.text, s.files)
	}
}

// TestRealOpenCodeServerClientDenies: OpenCode asks for a permission the
// policy has no rule for (writing outside the workspace:
// external_directory), the client answers with the policy's default, deny:
// the write fails, the model is told and goes on, no approval is
// requested.
func TestRealOpenCodeServerClientDenies(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside.txt")
	in, _ := json.Marshal(map[string]string{"filePath": outside, "content": "x\n"})
	script := fakemodel.Script{Turns: []fakemodel.Turn{{Tool: &fakemodel.ToolCall{Name: "write", Input: in}}, {Text: "could not"}}}
	policy := &sandbox.Policy{Default: sandbox.Deny, FileWrite: sandbox.Allow}
	f := newFixture(t, script, policy)
	evs := f.run(t, testCtx(t), "t", "write outside", serverMode)
	s := summarize(t, evs)
	var result string
	var isError bool
	for _, e := range evs {
		if e.Type == event.ToolCallResult {
			result, isError = e.Content, e.IsError
		}
	}
	if !isError || s.approval != nil {
		t.Errorf("write outside: result %q error %v approval %+v", result, isError, s.approval)
	}
	if _, err := os.Stat(outside); err == nil {
		t.Error("the file outside the workspace was written")
	}
	if s.last.Type != event.RunFinished || s.text != "could not" {
		t.Errorf("last %s %s, text %q", s.last.Type, s.last.Message, s.text)
	}
}
