package acp_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/acp"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

// openCodeConfig writes an opencode.json that points opencode at the
// scripted model and has it ask (session/request_permission) before every
// shell command, and returns its path.
func openCodeConfig(t *testing.T, srv *fakemodel.Server) string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "opencode.json")
	conf := map[string]any{"autoupdate": false, "share": "disabled", "model": "corral/" + fakemodel.ModelID,
		"permission": map[string]any{"bash": "ask", "edit": "ask"},
		"provider": map[string]any{"corral": map[string]any{"npm": "@ai-sdk/openai-compatible", "name": "corral",
			"options": map[string]any{"baseURL": srv.OpenAIURL(), "apiKey": "{env:OPENAI_API_KEY}"},
			"models":  map[string]any{fakemodel.ModelID: map[string]any{"name": fakemodel.ModelID}}}}}
	b, _ := json.Marshal(conf)
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestRealOpenCodeACPSession drives a real ACP agent not written here,
// `opencode acp`, against the scripted model through the runner:
//
//  1. session/new and a prompt whose turn runs `rm README.md`: the tool
//     call's arguments are the real command (opencode opens the call with
//     rawInput {} and sends the command later); opencode asks
//     (session/request_permission) and corral's policy, which denies
//     `rm *`, rejects it: README.md is still there.
//  2. the thread's next run: session/load of the first run's session; the
//     model gets the earlier conversation.
//  3. a run whose answer streams slowly is cancelled: corral sends
//     session/cancel, opencode ends the turn itself within the grace, no
//     process of the agent is left.
//  4. with approvalWait, a permission request the policy asks about
//     (touch *) waits; Runner.Answer allows it and the same turn runs it.
func TestRealOpenCodeACPSession(t *testing.T) {
	bin := testutil.AgentBin(t, "opencode")
	srv := fakemodel.New(t, fakemodel.Script{Turns: []fakemodel.Turn{{Command: "rm README.md"}, {Text: "not allowed"}, {Text: "resumed"}}})
	var long strings.Builder
	for i := 1; i <= 200; i++ {
		fmt.Fprintf(&long, "Line %03d of a long answer.\n", i)
	}
	slow := fakemodel.New(t, fakemodel.Script{Turns: []fakemodel.Turn{{Text: long.String()}}, Delay: 50 * time.Millisecond, ChunkSize: 8})
	base := t.TempDir()
	p, err := local.New(local.Options{BaseDir: base})
	if err != nil {
		t.Fatal(err)
	}
	policy := &sandbox.Policy{Commands: sandbox.CommandRules{Deny: []string{"rm *"}, Ask: []string{"touch *"}}, Default: sandbox.Allow}
	live := fakemodel.New(t, fakemodel.RunCommandThenSay("touch live.txt", "made it"))
	def := &sandbox.Definition{ID: "d", Provider: p, Policy: policy,
		Workspace: &sandbox.Workspace{Skills: []sandbox.Skill{{Path: "README.md", Content: "hello\n"}}}}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	h := acp.New(acp.Options{StartTimeout: time.Minute, ExitGrace: 5 * time.Second, CancelGrace: 30 * time.Second})
	t.Cleanup(func() { _ = h.Close(testCtx(t)) })
	r, err := run.New(st, []*sandbox.Definition{def}, []harness.Harness{h}, run.Options{JournalDir: t.TempDir(), PollInterval: 50 * time.Millisecond, CancelCheck: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(testCtx(t)) })
	mark := fmt.Sprintf("opencode-session-%d-%d", os.Getpid(), time.Now().UnixNano())
	killMarked(t, mark)
	state := t.TempDir()
	envFor := func(srv *fakemodel.Server) map[string]string {
		env := map[string]string{"OPENCODE_CONFIG": openCodeConfig(t, srv), "OPENAI_API_KEY": "sk-fake", "OPENCODE_DISABLE_AUTOUPDATE": "1",
			"OPENCODE_DISABLE_LSP_DOWNLOAD": "1", markEnv: mark}
		for _, k := range []string{"XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"} {
			env[k] = filepath.Join(state, k)
		}
		return env
	}
	ctx := testCtx(t)
	type outcome struct {
		evs    []event.Event
		status store.RunStatus
		exit   int
	}
	start := func(thread, prompt string, env map[string]string, onEvent func(string, event.Event), opts ...string) outcome {
		t.Helper()
		options := map[string]string{}
		for i := 0; i+1 < len(opts); i += 2 {
			options[opts[i]] = opts[i+1]
		}
		rec, err := r.Start(ctx, run.StartRequest{Definition: "d", Thread: thread, Harness: acp.Name, Prompt: prompt, Args: []string{bin, "acp"}, Env: env, Options: options})
		if err != nil {
			t.Fatal(err)
		}
		var o outcome
		if err := r.Follow(ctx, rec.ID, 0, func(e store.Event) error {
			ev, err := event.Unmarshal(e.Data)
			if err != nil {
				return err
			}
			o.evs = append(o.evs, ev)
			t.Logf("event: %.300s", e.Data)
			if onEvent != nil {
				onEvent(rec.ID, ev)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := h.Wait(ctx, rec.ID); err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(ctx, rec.ID); err != nil {
			t.Fatal(err)
		}
		final, _, _ := r.Store().GetRun(ctx, rec.ID)
		o.status = final.Status
		if l := last(o.evs); l.ExitCode != nil {
			o.exit = *l.ExitCode
		}
		return o
	}
	session := func(evs []event.Event) string {
		for _, v := range customs(evs, event.SessionStarted) {
			var s event.Session
			_ = json.Unmarshal(v, &s)
			return s.ID
		}
		return ""
	}

	// 1. A session, a prompt, a tool call with its real arguments, and a
	// permission request answered by the policy.
	env := envFor(srv)
	first := start("th", "remove the readme", env, nil)
	sid := session(first.evs)
	var args, result string
	var isError bool
	calls := 0
	for _, tc := range toolCalls(t, first.evs) {
		if tc.name != "execute" {
			continue
		}
		calls++
		args, result, isError = tc.args, tc.result, tc.isError
	}
	var input struct{ Command string }
	_ = json.Unmarshal([]byte(args), &input)
	_, readme := os.Stat(filepath.Join(sandboxDir(t, base), "README.md"))
	// opencode reports corral's reject_once answer as the user's.
	rejected := strings.Contains(result, "rejected permission")
	if sid == "" || first.status != store.RunCompleted || calls != 1 || input.Command != "rm README.md" || !isError || !rejected || readme != nil {
		t.Errorf("first run: session %q, status %s, %d shell calls, args %s, result %q (error %v), README.md %v:\n%s",
			sid, first.status, calls, args, result, isError, readme, dump(first.evs))
	}

	// 2. The thread's next run loads the session.
	second := start("th", "and now?", env, nil)
	notResumed := len(customs(second.evs, acp.EventSessionNotResumed))
	reqs := srv.ModelRequests()
	carried := len(reqs) > 0 && strings.Contains(string(reqs[len(reqs)-1].Body), "remove the readme")
	if session(second.evs) != sid || notResumed != 0 || !carried || second.status != store.RunCompleted {
		t.Errorf("second run: session %q (first %q), not resumed %d, earlier conversation carried %v, status %s:\n%s",
			session(second.evs), sid, notResumed, carried, second.status, dump(second.evs))
	}

	// 3. Cancel mid-answer.
	cancelled, deltas := false, 0
	third := start("th-cancel", "write a long answer", envFor(slow), func(id string, ev event.Event) {
		if ev.Type == event.TextMessageContent {
			deltas++
			if !cancelled {
				cancelled = true
				if _, err := r.Cancel(ctx, id); err != nil {
					t.Error(err)
				}
			}
		}
	})
	left := marked(t, mark)
	if !cancelled || third.status != store.RunCancelled || third.exit != 1 || len(left) != 0 {
		t.Errorf("cancelled run: status %s, exit %d (1: the agent ended its turn itself; 143: it was killed), processes left %d%s",
			third.status, third.exit, len(left), describe(left))
	}

	// 4. A live answer: the policy asks before touch *, the request waits
	// (approvalWait) and an answer given while the turn is live lets it go on.
	answered := false
	fourth := start("th-live", "make live.txt", envFor(live), func(id string, ev event.Event) {
		if ev.Type == event.Custom && ev.Name == acp.EventApprovalWaiting && !answered {
			answered = true
			if err := r.Answer(ctx, id, "acp:command:touch live.txt", true); err != nil {
				t.Error(err)
			}
		}
	}, acp.OptionApprovalWait, "2m")
	made, _ := filepath.Glob(filepath.Join(base, "*", "live.txt"))
	var by string
	for _, v := range customs(fourth.evs, acp.EventApprovalAnswered) {
		var m map[string]any
		_ = json.Unmarshal(v, &m)
		by, _ = m["by"].(string)
	}
	if !answered || by != "answer" || len(made) != 1 || fourth.status != store.RunCompleted {
		t.Errorf("live answer: answered %v, settled by %q, live.txt made %d, status %s:\n%s", answered, by, len(made), fourth.status, dump(fourth.evs))
	}
	t.Logf("opencode acp: session %s; shell call args %s, permission request answered by policy (deny rm *): rejected %v, README.md kept %v; "+
		"next run loaded the session %v (earlier conversation in the model request %v); cancel: %d of 200 lines streamed, run %s exit %d, processes left %d; "+
		"live answer to a waiting permission request: settled by %q, live.txt made %v in the same run",
		sid, args, rejected, readme == nil, session(second.evs) == sid, carried, deltas, third.status, third.exit, len(left), by, len(made) == 1)
}

// sandboxDir is the one sandbox directory under a local provider's base.
func sandboxDir(t *testing.T, base string) string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(base, "*", "README.md"))
	if len(dirs) == 0 {
		return filepath.Join(base, "none")
	}
	return filepath.Dir(dirs[0])
}
