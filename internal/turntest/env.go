package turntest

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

// Env is a warm-session test's world, shared by the runners of a test:
// one store, one journal directory (where the keeper directories live),
// a local provider's definition "d" on a git workspace, the harness under
// test, and what every turn starts with.
type Env struct {
	// Store is the runners' store.
	Store store.Store
	// Def is the sandbox definition, "d".
	Def *sandbox.Definition
	// Journals is the journal directory; the keeper directories are in it.
	Journals string
	// Harness is the harness under test.
	Harness harness.Harness
	// Prefix begins the names of the harness's keeper directories.
	Prefix string
	// Model, Options and Env go into every turn's start request.
	Model   string
	Options map[string]string
	Env     map[string]string
}

// NewEnv makes an Env for h, whose keeper directories begin with prefix,
// with secrets in the workspace. At the test's end it logs the keeper
// directories' files when the test failed and kills every keeper's
// session.
func NewEnv(tb testing.TB, h harness.Harness, prefix string, secrets map[string]string) *Env {
	tb.Helper()
	p, err := local.New(local.Options{BaseDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	sec, err := sandbox.NewSecrets(secrets)
	if err != nil {
		tb.Fatal(err)
	}
	st := memstore.New(memstore.Options{})
	tb.Cleanup(func() { st.Close() })
	w := &Env{
		Store: st, Journals: tb.TempDir(), Harness: h, Prefix: prefix, Options: map[string]string{},
		Def: &sandbox.Definition{ID: "d", Provider: p,
			Workspace: &sandbox.Workspace{Source: &sandbox.Source{Git: testutil.BareRepo(tb, map[string]string{"README.md": "hi\n"})}, Secrets: sec}},
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			testutil.LogFiles(tb, nil, filepath.Join(w.Journals, prefix+"*", "*"), filepath.Join(w.Journals, "*"))
		}
		w.KillKeepers()
	})
	return w
}

// Runner returns a new runner on the Env's store and journal directory,
// closed at the test's end.
func (w *Env) Runner(tb testing.TB) *run.Runner {
	tb.Helper()
	r, err := run.New(w.Store, []*sandbox.Definition{w.Def}, []harness.Harness{w.Harness}, run.Options{
		PollInterval: 50 * time.Millisecond, JournalDir: w.Journals, LeaseTTL: 2 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// Start starts a turn of thread "th" on r.
func (w *Env) Start(tb testing.TB, ctx context.Context, r *run.Runner, prompt string) store.Run {
	tb.Helper()
	return w.StartIn(tb, ctx, r, "th", prompt)
}

// StartIn starts a turn of thread on r.
func (w *Env) StartIn(tb testing.TB, ctx context.Context, r *run.Runner, thread, prompt string) store.Run {
	tb.Helper()
	rec, err := r.Start(ctx, run.StartRequest{Definition: w.Def.ID, Thread: thread, Harness: w.Harness.Name(), Prompt: prompt,
		Model: w.Model, Env: w.Env, Options: w.Options})
	if err != nil {
		tb.Fatal(err)
	}
	return rec
}

// KeeperPid is the pid the one keeper directory records (0: none, or
// more than one).
func (w *Env) KeeperPid() int {
	return testutil.PidFile(filepath.Join(w.Journals, w.Prefix+"*", "pid"))
}

// KillKeepers kills the keeper of every thread (their whole sessions).
func (w *Env) KillKeepers() { KillKeepers(w.Journals, w.Prefix) }

// KillKeepers kills the keepers whose directories, in journals, begin
// with prefix (their whole sessions).
func KillKeepers(journals, prefix string) {
	files, _ := filepath.Glob(filepath.Join(journals, prefix+"*", "pid"))
	for _, f := range files {
		if pid := testutil.PidFile(f); pid > 0 {
			_ = testutil.KillGroup(pid)
		}
	}
}

// Events follows run id on r to its end and returns its events.
func Events(tb testing.TB, ctx context.Context, r *run.Runner, id string) []event.Event {
	tb.Helper()
	var evs []event.Event
	if err := r.Follow(ctx, id, 0, func(e store.Event) error {
		ev, err := event.Unmarshal(e.Data)
		if err == nil {
			evs = append(evs, ev)
		}
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	return evs
}

// Text is the text of evs' TEXT_MESSAGE_CONTENT events.
func Text(evs []event.Event) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type == event.TextMessageContent {
			b.WriteString(e.Delta)
		}
	}
	return b.String()
}

// Session is the session id of evs' SESSION_STARTED event ("" when none).
func Session(evs []event.Event) string {
	for _, e := range evs {
		if e.Type == event.Custom && e.Name == event.SessionStarted {
			var s event.Session
			if json.Unmarshal(e.Value, &s) == nil {
				return s.ID
			}
		}
	}
	return ""
}

// CheckTakeover runs a thread's two turns, the fake model answering "one"
// and then answer: the second turn's driving runner goes away mid-answer
// (it closes, dropping its driver and lease, as the takeover tests do),
// another runner on the same store takes it over, and tb fails unless it
// is delivered once (every stored event delivered in order, one
// RUN_FINISHED, the whole answer) on the keeper that served the first.
func (w *Env) CheckTakeover(tb testing.TB, ctx context.Context, answer string) {
	tb.Helper()
	a, b := w.Runner(tb), w.Runner(tb)
	rec := w.Start(tb, ctx, a, "First?")
	if text := Text(Events(tb, ctx, a, rec.ID)); text != "one" {
		tb.Fatalf("first turn: %q", text)
	}
	pid := w.KeeperPid()
	rec = w.Start(tb, ctx, a, "Second?")
	UntilText(ctx, a, rec.ID)
	if err := a.Close(ctx); err != nil {
		tb.Fatal(err)
	}
	var seqs []int64
	if err := b.Attach(ctx, rec.ID, 0, func(e store.Event) error { seqs = append(seqs, e.Seq); return nil }); err != nil {
		tb.Fatal(err)
	}
	if err := b.Wait(ctx, rec.ID); err != nil {
		tb.Fatal(err)
	}
	stored, err := w.Store.ReadEvents(ctx, rec.ID, 0, 0)
	if err != nil {
		tb.Fatal(err)
	}
	var evs []event.Event
	finished := 0
	for i, e := range stored {
		if e.Seq != int64(i+1) || i >= len(seqs) || seqs[i] != e.Seq {
			tb.Fatalf("event %d has seq %d (delivered %v)", i+1, e.Seq, seqs)
		}
		ev, _ := event.Unmarshal(e.Data)
		evs = append(evs, ev)
		if ev.Type == event.RunFinished {
			finished++
		}
	}
	text := Text(evs)
	final, _, _ := w.Store.GetRun(ctx, rec.ID)
	if final.Status != store.RunCompleted || final.DriverEpoch < 2 || len(seqs) != len(stored) || finished != 1 || text != answer || w.KeeperPid() != pid {
		tb.Errorf("status %s epoch %d, delivered %d of %d, %d RUN_FINISHED, text %d bytes (want %d), keeper %d (was %d)",
			final.Status, final.DriverEpoch, len(seqs), len(stored), finished, len(text), len(answer), w.KeeperPid(), pid)
	}
}
