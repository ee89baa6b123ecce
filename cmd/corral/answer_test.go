package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

func TestCheckWaiting(t *testing.T) {
	evs := func(es ...event.Event) []store.Event {
		var out []store.Event
		for i, e := range es {
			out = append(out, store.Event{Seq: int64(i + 1), Data: e.Marshal()})
		}
		return out
	}
	waiting := func(id string) event.Event {
		return event.CustomEvent(event.ApprovalWaiting, map[string]string{"approvalId": id, "wait": "1m0s"})
	}
	answered := func(id string, allowed bool, by string) event.Event {
		return event.CustomEvent(event.ApprovalAnswered, event.ApprovalAnswer{ApprovalID: id, Allowed: allowed, By: by})
	}
	for _, tc := range []struct {
		name string
		log  []store.Event
		id   string
		code sandbox.Code
		msg  string
	}{
		{"waiting", evs(waiting("a")), "a", sandbox.OK, ""},
		{"waiting among others", evs(waiting("a"), waiting("b"), answered("a", true, "answer")), "b", sandbox.OK, ""},
		{"never asked, none waiting", evs(event.Event{Type: event.RunStarted}), "a", sandbox.NotFound, "none other is"},
		{"mistyped, the waiting one named", evs(waiting("claude-code:command:touch x")), "claude-code:command:touch y", sandbox.NotFound, "waiting: 'claude-code:command:touch x'"},
		{"settled by its deadline", evs(waiting("a"), answered("a", false, "deadline")), "a", sandbox.FailedPrecondition, "already settled: denied by deadline"},
		{"settled by an answer", evs(waiting("a"), answered("a", true, "answer")), "a", sandbox.FailedPrecondition, "allowed by answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkWaiting("run-1", tc.id, tc.log)
			if tc.code == sandbox.OK {
				if err != nil {
					t.Fatalf("got %v", err)
				}
				return
			}
			if sandbox.CodeOf(err) != tc.code || !strings.Contains(fmt.Sprint(err), tc.msg) {
				t.Errorf("got %v (%s), want %s containing %q", err, sandbox.CodeOf(err), tc.code, tc.msg)
			}
		})
	}
}

// TestClaudeAnswerLive: `corral run -d … --option approvalWait=…` with a
// real Claude Code asks, the request waits in the turn, `corral answer RUN
// ID --allow` (another corral process) lets the same turn go on, and the
// command ran; --deny leaves it undone; a second answer is refused as
// settled, a mistyped id names the waiting one.
func TestClaudeAnswerLive(t *testing.T) {
	bin := testutil.AgentBin(t, "claude")
	if !harnessRegistered(t, "claude-code") {
		t.Skip("this corral has no claude-code harness registered (cmd/corral/harnesses.go)")
	}
	const cmd = "touch approved.txt"
	id := "claude-code:command:" + cmd
	for _, answer := range []string{"--allow", "--deny"} {
		t.Run(answer, func(t *testing.T) {
			srv := fakemodel.New(t, fakemodel.Script{Turns: []fakemodel.Turn{{Command: cmd}, {Text: "done"}}})
			dir, base := t.TempDir(), t.TempDir()
			repo := testutil.BareRepo(t, map[string]string{"README.md": "answer test\n"})
			cfg := filepath.Join(dir, "corral.yaml")
			yaml := fmt.Sprintf(`id: claude-answer
provider:
  name: local
  local: {baseDir: %s}
workspace:
  source: {git: %q}
  secrets:
    ANTHROPIC_API_KEY: {env: CORRAL_TEST_ANTHROPIC_KEY}
policy:
  commands: {ask: ["touch *"]}
  default: deny
`, base, repo)
			if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			home := filepath.Join(dir, "home")
			if err := os.MkdirAll(home, 0o755); err != nil {
				t.Fatal(err)
			}
			extra := []string{"XDG_STATE_HOME=" + dir, "HOME=" + home, "CORRAL_TEST_ANTHROPIC_KEY=sk-ant-fake-answer-key",
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1"}
			corral := func(args ...string) (string, string, int) { t.Helper(); return cli(t, extra, args...) }
			t.Cleanup(func() { corral("down", "--config", cfg, "--thread", "t") })
			// The run in the foreground, as in one terminal; the answer from
			// another corral process, as from a second one.
			runCmd := exec.Command(corralBin, "run", "--config", cfg, "--thread", "t", "--harness", "claude-code", "--auth", "api-key",
				"--option", "executable="+bin, "--option", "baseURL="+srv.URL, "--option", "approvalWait=3m", "make approved.txt")
			runCmd.Env = append(os.Environ(), extra...)
			var runOut bytes.Buffer
			runErr := &syncBuffer{}
			runCmd.Stdout, runCmd.Stderr = &runOut, runErr
			if err := runCmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- runCmd.Wait() }()
			t.Cleanup(func() { _ = runCmd.Process.Kill(); <-exited })
			// The hint line names the run; wait for it (hang guard: 3 minutes).
			var runID string
			for deadline := time.Now().Add(3 * time.Minute); runID == ""; time.Sleep(100 * time.Millisecond) {
				for _, l := range strings.Split(runErr.String(), "\n") {
					if _, rest, ok := strings.Cut(l, "while the turn waits: corral answer "); ok {
						runID = strings.Trim(strings.Fields(rest)[0], "'")
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("the request never waited; stderr:\n%s", runErr.String())
				}
			}
			_, errTypo, codeTypo := corral("answer", "--config", cfg, runID, id+"x", answer)
			out, errOut, code := corral("answer", "--config", cfg, runID, id, answer)
			if code != 0 {
				t.Fatalf("corral answer: exit %d, stderr:\n%s", code, errOut)
			}
			var runCode int
			select {
			case err := <-exited:
				exited <- err
				if ee, ok := err.(*exec.ExitError); ok {
					runCode = ee.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
			case <-time.After(3 * time.Minute):
				t.Fatalf("the run did not end after the answer; stderr:\n%s", runErr.String())
			}
			_, errAgain, codeAgain := corral("answer", "--config", cfg, runID, id, answer)
			made, _ := filepath.Glob(filepath.Join(base, "*", "approved.txt"))
			if runCode != 0 || (len(made) == 1) != (answer == "--allow") {
				t.Errorf("after %s: run exit %d, files %q, stderr:\n%s", answer, runCode, made, runErr.String())
			}
			if !strings.Contains(runErr.String(), "approval '"+id+"'") {
				t.Errorf("the run did not print how the request was settled:\n%s", runErr.String())
			}
			if codeTypo == 0 || !strings.Contains(errTypo, "waiting: '"+id+"'") {
				t.Errorf("mistyped id: exit %d, stderr %q", codeTypo, errTypo)
			}
			if codeAgain == 0 || !strings.Contains(errAgain, "run has ended") && !strings.Contains(errAgain, "already settled") {
				t.Errorf("second answer: exit %d, stderr %q", codeAgain, errAgain)
			}
			t.Logf("corral answer %s: %q; run exit %d, approved.txt made %v; mistyped id refused (exit %d), second answer refused (exit %d)",
				answer, strings.TrimSpace(out), runCode, len(made) == 1, codeTypo, codeAgain)
		})
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
