package claudecode_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/claudecode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

// TestRealClaudeLiveApproval: with option approvalWait, the real claude's
// call that the policy asks about waits in corral's permission tool, with
// the turn, for an answer given while the run is live (Runner.Answer), and
// the same turn goes on with it: allowed, the command runs (file.changed
// lists its file); denied, it does not. Unanswered, the deadline hands it
// to the policy's default. Answers written into the answers file from
// inside the sandbox (what the agent could do: it knows its run directory,
// not the answer key) count for nothing and are reported; the genuine
// answer that follows them decides.
func TestRealClaudeLiveApproval(t *testing.T) {
	bin := testutil.AgentBin(t, "claude")
	const cmd = "touch approved.txt"
	id := sandbox.ApprovalID(claudecode.Name, sandbox.ApproveCommand, cmd)
	for _, c := range []struct {
		name    string
		def     sandbox.Decision // the policy's default; touch * asks
		wait    time.Duration
		answer  *bool // nil: nobody answers
		forge   bool  // forged answers are written first, then answer
		wantRan bool
		wantBy  string
	}{
		{"allowed live", sandbox.Deny, time.Minute, ptr(true), false, true, "answer"},
		{"denied live", sandbox.Allow, time.Minute, ptr(false), false, false, "answer"},
		{"deadline, default deny", sandbox.Deny, time.Second, nil, false, false, "deadline"},
		{"deadline, default allow", sandbox.Allow, time.Second, nil, false, true, "deadline"},
		{"forged by the agent, then denied", sandbox.Deny, time.Minute, ptr(false), true, false, "answer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := fakemodel.New(t, fakemodel.Script{Turns: []fakemodel.Turn{{Command: cmd}, {Text: "done"}}})
			p, err := local.New(local.Options{BaseDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			secrets, _ := sandbox.NewSecrets(map[string]string{claudecode.APIKeySecret: "sk-ant-fake-key"})
			def := &sandbox.Definition{
				ID: "claude", Provider: p,
				Workspace: &sandbox.Workspace{Source: &sandbox.Source{Git: testutil.BareRepo(t, map[string]string{"README.md": "hi\n"})}, Secrets: secrets},
				Policy:    &sandbox.Policy{Commands: sandbox.CommandRules{Ask: []string{"touch *"}}, Default: c.def},
			}
			st := memstore.New(memstore.Options{})
			t.Cleanup(func() { st.Close() })
			journals := t.TempDir()
			r, err := run.New(st, []*sandbox.Definition{def}, []harness.Harness{claudecode.Harness{}}, run.Options{PollInterval: 50 * time.Millisecond, JournalDir: journals})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Close(context.Background()) })
			ctx := testCtx(t)
			opts := map[string]string{"executable": bin, "baseURL": srv.URL,
				claudecode.OptApprovalWait: c.wait.String(), claudecode.OptAnswerPoll: "50ms"}
			rec, err := r.Start(ctx, run.StartRequest{Definition: "claude", Thread: "th", Harness: claudecode.Name, Prompt: "make approved.txt", Env: quietEnv(t), Options: opts})
			if err != nil {
				t.Fatal(err)
			}
			answer := func() error { return r.Answer(ctx, rec.ID, id, *c.answer) }
			var evs []event.Event
			if err := r.Follow(ctx, rec.ID, 0, func(e store.Event) error {
				ev, err := event.Unmarshal(e.Data)
				if err != nil {
					return err
				}
				evs = append(evs, ev)
				if ev.Type == event.Custom && ev.Name == event.ApprovalWaiting {
					// The tool read the answer key and removed it: the
					// agent finds no key file in its run directory.
					paths, err := journal.PathsFor(journals, rec.ID)
					if err != nil {
						return err
					}
					if _, err := os.Stat(filepath.Join(paths.Files, "answer.key")); !os.IsNotExist(err) {
						t.Errorf("the answer key file is still there while the request waits (%v)", err)
					}
				}
				switch {
				case ev.Type == event.Custom && ev.Name == event.ApprovalWaiting && c.forge:
					paths, err := journal.PathsFor(journals, rec.ID)
					if err != nil {
						return err
					}
					forged := `{"approvalId":"` + id + `","allow":true}` + "\n" +
						`{"approvalId":"` + id + `","allow":true,"mac":"` + strings.Repeat("0", 64) + `"}` + "\n"
					return os.WriteFile(filepath.Join(paths.Files, harness.AnswersFile), []byte(forged), 0o600)
				case ev.Type == event.Custom && ev.Name == event.ApprovalWaiting && c.answer != nil:
					return answer()
				case ev.Type == event.Custom && ev.Name == claudecode.EventWarning && c.forge:
					// The tool has read (and refused) the forged lines.
					return answer()
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if err := r.Wait(ctx, rec.ID); err != nil {
				t.Fatal(err)
			}
			if err := r.Answer(ctx, rec.ID, id, true); sandbox.CodeOf(err) != sandbox.FailedPrecondition {
				t.Errorf("answering a run that ended: %v, want FailedPrecondition", err)
			}
			final, _, _ := r.Store().GetRun(ctx, rec.ID)
			var (
				requested, waiting, warned int
				answered                   []event.ApprovalAnswer
				files                      []string
				results                    []string
			)
			for _, e := range evs {
				if e.Type == event.ToolCallResult {
					results = append(results, e.Content)
				}
				if e.Type != event.Custom {
					continue
				}
				switch e.Name {
				case event.ApprovalRequested:
					requested++
				case event.ApprovalWaiting:
					waiting++
				case event.ApprovalAnswered:
					var a event.ApprovalAnswer
					_ = json.Unmarshal(e.Value, &a)
					answered = append(answered, a)
				case claudecode.EventWarning:
					warned++
				case event.FileChanged:
					var fc event.FileChange
					_ = json.Unmarshal(e.Value, &fc)
					if fc.ToolCallID == "" {
						files = fc.Files
					}
				}
			}
			ran := strings.Join(files, ",") == "approved.txt"
			if ran != c.wantRan || final.Status != store.RunCompleted || requested != 1 || waiting != 1 || len(answered) != 1 ||
				answered[0].By != c.wantBy || answered[0].Allowed != c.wantRan || answered[0].ApprovalID != id {
				t.Errorf("command ran %v (want %v), status %s, requested %d, waiting %d, answered %+v, results %q",
					ran, c.wantRan, final.Status, requested, waiting, answered, results)
			}
			if c.forge && warned == 0 {
				t.Error("no warning about the forged answers")
			}
			if end := evs[len(evs)-1]; end.Type != event.RunFinished || (end.Outcome != nil && end.Outcome.Type == event.OutcomeInterrupt) {
				t.Errorf("last event %+v: want RUN_FINISHED without the interrupt outcome", end)
			}
			if c.forge {
				t.Logf("forged answers: 2 written inside the sandbox, 0 accepted, warned %d time(s)", warned)
			}
			t.Logf("%s: 1 request, settled by %s (allowed %v) in the same run; command ran %v; run %s; results %q",
				c.name, answered[0].By, answered[0].Allowed, ran, final.Status, results)
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestRealClaudeLiveApprovalSurvivesTheDriver: the permission tool waits
// inside the sandbox, under the journal wrapper, so a request pending when
// the driving runner goes away (it closes, dropping its driver and lease,
// as the takeover tests do) is still pending: another runner on the same
// store (another replica) answers it and takes the run over, and the same
// turn finishes with the allowed command run once, every event delivered
// once. The answer comes before the takeover or after it.
func TestRealClaudeLiveApprovalSurvivesTheDriver(t *testing.T) {
	bin := testutil.AgentBin(t, "claude")
	const cmd = "echo ran >> ran.txt"
	id := sandbox.ApprovalID(claudecode.Name, sandbox.ApproveCommand, cmd)
	for _, c := range []struct {
		name        string
		answerFirst bool
	}{{"answered, then taken over", true}, {"taken over, then answered", false}} {
		t.Run(c.name, func(t *testing.T) {
			srv := fakemodel.New(t, fakemodel.Script{Turns: []fakemodel.Turn{{Command: cmd}, {Text: "done"}}})
			p, err := local.New(local.Options{BaseDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			secrets, _ := sandbox.NewSecrets(map[string]string{claudecode.APIKeySecret: "sk-ant-fake-key"})
			def := &sandbox.Definition{
				ID: "claude", Provider: p,
				Workspace: &sandbox.Workspace{Source: &sandbox.Source{Git: testutil.BareRepo(t, map[string]string{"README.md": "hi\n"})}, Secrets: secrets},
				Policy:    &sandbox.Policy{Commands: sandbox.CommandRules{Ask: []string{"echo *"}}, Default: sandbox.Deny},
			}
			st := memstore.New(memstore.Options{})
			t.Cleanup(func() { st.Close() })
			journals := t.TempDir()
			newRunner := func() *run.Runner {
				r, err := run.New(st, []*sandbox.Definition{def}, []harness.Harness{claudecode.Harness{}}, run.Options{
					PollInterval: 50 * time.Millisecond, JournalDir: journals, LeaseTTL: 2 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = r.Close(context.Background()) })
				return r
			}
			a, b := newRunner(), newRunner()
			ctx := testCtx(t)
			rec, err := a.Start(ctx, run.StartRequest{Definition: "claude", Thread: "th", Harness: claudecode.Name, Prompt: "run it", Env: quietEnv(t),
				Options: map[string]string{"executable": bin, "baseURL": srv.URL, claudecode.OptApprovalWait: "2m", claudecode.OptAnswerPoll: "50ms"}})
			if err != nil {
				t.Fatal(err)
			}
			// Follow until the request waits, then the driving runner goes.
			fctx, stop := context.WithCancel(ctx)
			_ = a.Follow(fctx, rec.ID, 0, func(e store.Event) error {
				if ev, err := event.Unmarshal(e.Data); err == nil && ev.Type == event.Custom && ev.Name == event.ApprovalWaiting {
					stop()
				}
				return nil
			})
			stop()
			if ctx.Err() != nil {
				t.Fatal("the request never waited")
			}
			if err := a.Close(ctx); err != nil {
				t.Fatal(err)
			}
			mid, _, _ := st.GetRun(ctx, rec.ID)
			if mid.Status.Terminal() {
				t.Fatalf("the run ended with its driver: %s", mid.Status)
			}
			answered := false
			answer := func() {
				if err := b.Answer(ctx, rec.ID, id, true); err != nil {
					t.Fatalf("answering through the other runner: %v", err)
				}
				answered = true
			}
			if c.answerFirst {
				answer()
			}
			var seqs []int64
			if err := b.Attach(ctx, rec.ID, 0, func(e store.Event) error {
				seqs = append(seqs, e.Seq)
				if !answered {
					if ev, err := event.Unmarshal(e.Data); err == nil && ev.Type == event.Custom && ev.Name == event.ApprovalWaiting {
						answer()
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if err := b.Wait(ctx, rec.ID); err != nil {
				t.Fatal(err)
			}
			stored, err := st.ReadEvents(ctx, rec.ID, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			counts := map[string]int{}
			var patch string
			for i, e := range stored {
				if e.Seq != int64(i+1) || (i < len(seqs) && seqs[i] != e.Seq) {
					t.Fatalf("event %d has seq %d (delivered %v)", i+1, e.Seq, seqs)
				}
				ev, _ := event.Unmarshal(e.Data)
				k := string(ev.Type)
				if ev.Type == event.Custom {
					k = ev.Name
				}
				counts[k]++
				if ev.Type == event.Custom && ev.Name == event.FileChanged {
					var fc event.FileChange
					_ = json.Unmarshal(ev.Value, &fc)
					if fc.ToolCallID == "" {
						patch = fc.Patch
					}
				}
			}
			final, _, _ := st.GetRun(ctx, rec.ID)
			ranLines := strings.Count(patch, "\n+ran")
			if final.Status != store.RunCompleted || final.DriverEpoch < 2 || len(seqs) != len(stored) || ranLines != 1 ||
				counts[event.ApprovalRequested] != 1 || counts[event.ApprovalWaiting] != 1 || counts[event.ApprovalAnswered] != 1 ||
				counts[string(event.ToolCallResult)] != 1 || counts[string(event.RunFinished)] != 1 {
				t.Errorf("status %s epoch %d, delivered %d of %d stored, command ran %d time(s), counts %v, patch %q",
					final.Status, final.DriverEpoch, len(seqs), len(stored), ranLines, counts, patch)
			}
			t.Logf("%s: driver closed while the request waited; answered through the other runner; %d events delivered of %d stored, each once; command ran %d time(s); run %s at epoch %d",
				c.name, len(seqs), len(stored), ranLines, final.Status, final.DriverEpoch)
		})
	}
}
