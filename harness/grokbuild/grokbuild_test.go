package grokbuild_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/grokbuild"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/memstore"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func readLines(t testing.TB, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
}

func exitOf(t testing.TB, stream string) int {
	t.Helper()
	b, err := os.ReadFile(strings.TrimSuffix(stream, ".ndjson") + ".exit")
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

func translate(run harness.Run, lines [][]byte, code int) []event.Event {
	tr := grokbuild.Harness{}.Translator(run)
	evs := tr.Begin()
	for _, l := range lines {
		evs = append(evs, tr.Line(l)...)
	}
	return append(evs, tr.End(code)...)
}

func dump(evs []event.Event) string {
	var b bytes.Buffer
	for _, e := range evs {
		b.Write(e.Marshal())
		b.WriteByte('\n')
	}
	return b.String()
}

func streams(t testing.TB) []string {
	t.Helper()
	all, err := filepath.Glob(filepath.Join("testdata", "*.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range all {
		if !strings.HasSuffix(s, ".golden.ndjson") {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		t.Fatal("no fixtures")
	}
	return out
}

// wellFormed checks what every run's events keep: RUN_STARTED first, one
// terminal event last, every tool call closed and answered once.
func wellFormed(t *testing.T, evs []event.Event) {
	t.Helper()
	if evs[0].Type != event.RunStarted || !evs[len(evs)-1].Terminal() {
		t.Fatalf("bad run: %s", dump(evs))
	}
	open := map[string]int{}
	for i, e := range evs {
		if e.Terminal() && i != len(evs)-1 {
			t.Fatalf("terminal event mid-run: %s", dump(evs))
		}
		switch e.Type {
		case event.ToolCallStart:
			open[e.ToolCallID]++
		case event.ToolCallArgs:
			if !json.Valid([]byte(e.Delta)) {
				t.Errorf("args are not JSON: %q", e.Delta)
			}
		case event.ToolCallResult:
			open[e.ToolCallID]--
		}
	}
	for id, n := range open {
		if n != 0 {
			t.Errorf("tool call %s: %d starts without a result", id, n)
		}
	}
}

func TestGolden(t *testing.T) {
	for _, s := range streams(t) {
		name := strings.TrimSuffix(filepath.Base(s), ".ndjson")
		t.Run(name, func(t *testing.T) {
			evs := translate(harness.Run{RunID: "run-1", ThreadID: "thread-1"}, readLines(t, s), exitOf(t, s))
			wellFormed(t, evs)
			got := dump(evs)
			golden := filepath.Join("testdata", name+".golden.ndjson")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("events differ from %s (-update to accept):\n got:\n%s", golden, got)
			}
		})
	}
}

func FuzzTranslate(f *testing.F) {
	for _, s := range streams(f) {
		for _, l := range readLines(f, s) {
			f.Add(l, 0)
		}
	}
	f.Add([]byte(`{"type":"plan","entries":[1,2`), 1)
	f.Add([]byte(`{"type":"item.updated","item":{"id":"i","type":"agent_message","text":"é"}}`), 0)
	f.Fuzz(func(t *testing.T, data []byte, code int) {
		evs := translate(harness.Run{RunID: "r", ThreadID: "t"}, bytes.Split(data, []byte("\n")), code)
		n := 0
		for _, e := range evs {
			if e.Terminal() {
				n++
			}
			_ = e.Marshal()
		}
		if n != 1 || !evs[len(evs)-1].Terminal() {
			t.Fatalf("malformed run: %s", dump(evs))
		}
	})
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestPrepareRefuses(t *testing.T) {
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	hd, err := p.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hd.Destroy(context.Background()) })
	key, _ := sandbox.NewSecrets(map[string]string{"GROK_API_KEY": "k"})
	ok := harness.Request{Prompt: "p", RunDir: "/tmp/x", Secrets: key}
	cases := []struct {
		name string
		mod  func(*harness.Request)
		code sandbox.Code
	}{
		{"NoPrompt", func(r *harness.Request) { r.Prompt = " " }, sandbox.InvalidArgument},
		{"NoRunDir", func(r *harness.Request) { r.RunDir = "" }, sandbox.InvalidArgument},
		{"NoKey", func(r *harness.Request) { r.Secrets = sandbox.Secrets{} }, sandbox.FailedPrecondition},
		{"BadAuth", func(r *harness.Request) { r.Auth = "password" }, sandbox.InvalidArgument},
		{"BadMaxTurns", func(r *harness.Request) { r.Options = map[string]string{grokbuild.OptionMaxTurns: "many"} }, sandbox.InvalidArgument},
		{"BadMCP", func(r *harness.Request) { r.MCPServers = []sandbox.MCPServer{{Name: "x"}} }, sandbox.InvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := ok
			c.mod(&req)
			if _, err := (grokbuild.Harness{}).Prepare(ctx, hd, req); sandbox.CodeOf(err) != c.code {
				t.Fatalf("err = %v, want %s", err, c.code)
			}
		})
	}
}

// fixture is a runner over a local sandbox whose workspace has a Grok
// configuration of its own and an API key secret.
type fixture struct {
	r      *run.Runner
	fake   string // the fake CLI
	record string // where it records what it saw
	ws     string // the sandbox's workspace, once created
}

const userConfig = "# the user's own Grok settings\nmodel = \"grok-build\"\n\n[mcp_servers.mine]\ncommand = \"my-mcp\"\n"

func newFixture(t *testing.T, policy *sandbox.Policy, git bool, mcp ...sandbox.MCPServer) *fixture {
	t.Helper()
	fake, err := filepath.Abs(filepath.Join("testdata", "fake-grok.sh"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := sandbox.NewSecrets(map[string]string{"XAI_API_KEY": "xai-test-key-123", "DOCS_TOKEN": "docs-token-456"})
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { st.Close() })
	ws := &sandbox.Workspace{Secrets: secrets, Skills: []sandbox.Skill{{Path: grokbuild.ConfigPath, Content: userConfig}}}
	if git {
		ws = &sandbox.Workspace{Secrets: secrets, Source: &sandbox.Source{Git: testutil.BareRepo(t, map[string]string{
			grokbuild.ConfigPath: userConfig, "README.md": "# project\n"})}}
	}
	ws.MCPServers = mcp
	def := &sandbox.Definition{ID: "d", Provider: p, Policy: policy, Workspace: ws}
	r, err := run.New(st, []*sandbox.Definition{def}, []harness.Harness{grokbuild.Harness{}},
		run.Options{JournalDir: t.TempDir(), LeaseTTL: 2 * time.Second, PollInterval: 50 * time.Millisecond, CancelCheck: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return &fixture{r: r, fake: fake, record: t.TempDir()}
}

func (f *fixture) start(t *testing.T, ctx context.Context, stream string, req run.StartRequest) store.Run {
	t.Helper()
	abs, err := filepath.Abs(stream)
	if err != nil {
		t.Fatal(err)
	}
	req.Definition, req.Harness = "d", grokbuild.Name
	if req.Thread == "" {
		req.Thread = "th"
	}
	if req.Options == nil {
		req.Options = map[string]string{}
	}
	req.Options[grokbuild.OptionExecutable] = f.fake
	env := map[string]string{"FAKE_GROK_RECORD": f.record, "FAKE_GROK_STREAM": abs, "FAKE_GROK_EXIT": strconv.Itoa(exitOf(t, stream))}
	for k, v := range req.Env {
		env[k] = v
	}
	req.Env = env
	rec, err := f.r.Start(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func (f *fixture) follow(t *testing.T, ctx context.Context, id string, each func(event.Event)) []event.Event {
	t.Helper()
	var evs []event.Event
	if err := f.r.Follow(ctx, id, 0, func(e store.Event) error {
		ev, err := event.Unmarshal(e.Data)
		if err != nil {
			return err
		}
		evs = append(evs, ev)
		if each != nil {
			each(ev)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return evs
}

func (f *fixture) recorded(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.record, name))
	if err != nil {
		t.Fatalf("the fake CLI recorded no %s: %v", name, err)
	}
	return string(b)
}

func (f *fixture) workspace(t *testing.T, ctx context.Context) sandbox.Handle {
	t.Helper()
	def, _ := f.r.Definition("d")
	res, ok, err := f.r.Ensure().EnsureExisting(ctx, def, ensureReq("th"))
	if err != nil || !ok {
		t.Fatalf("the thread's sandbox: %v %v", ok, err)
	}
	return res.Handle
}

// normalize replaces the run's ids so a run's events compare with a golden
// file written for run-1 in thread-1.
func normalize(evs []event.Event, rec store.Run) string {
	s := dump(evs)
	s = strings.ReplaceAll(s, rec.ID, "run-1")
	return strings.ReplaceAll(s, `"threadId":"`+rec.ThreadID+`"`, `"threadId":"thread-1"`)
}

// TestFakeCLIThroughTheRunner runs a stand-in CLI that replays the basic
// stream, through run.Runner on a local sandbox, and checks the command
// line, environment, prompt file and merged configuration it saw, the
// events, and that the workspace's configuration is back as it was.
func TestFakeCLIThroughTheRunner(t *testing.T) {
	f := newFixture(t, &sandbox.Policy{Default: sandbox.Allow, Commands: sandbox.CommandRules{Deny: []string{"sudo *"}}}, false, docsServer)
	ctx := testCtx(t)
	rec := f.start(t, ctx, "testdata/basic.ndjson", run.StartRequest{Prompt: "fix the failing test", Model: "grok-build",
		Options: map[string]string{grokbuild.OptionMaxTurns: "8"}})
	evs := f.follow(t, ctx, rec.ID, nil)
	want, err := os.ReadFile(filepath.Join("testdata", "basic.golden.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	if got := normalize(evs, rec); got != string(want) {
		t.Errorf("events differ from the golden file:\n%s", got)
	}
	stored, _, _ := f.r.Store().GetRun(ctx, rec.ID)
	if stored.Status != store.RunCompleted {
		t.Errorf("run status %s (%s)", stored.Status, stored.Error)
	}

	argv := strings.Split(strings.TrimSpace(f.recorded(t, "argv")), "\n")
	joined := " " + strings.Join(argv, " ") + " "
	for _, want := range []string{" --output-format streaming-json ", " --no-auto-update ", " -m grok-build ", " --max-turns 8 ",
		" --always-approve ", " --deny Bash(sudo *) "} {
		if !strings.Contains(joined, want) {
			t.Errorf("argv lacks %q: %q", want, argv)
		}
	}
	if strings.Contains(joined, "fix the failing test") || strings.Contains(joined, "xai-test-key") || strings.Contains(joined, "--resume") {
		t.Errorf("no prompt, key or resume in argv: %q", argv)
	}
	if got := f.recorded(t, "prompt"); got != "fix the failing test" {
		t.Errorf("prompt file = %q", got)
	}
	if f.recorded(t, "xai_api_key") != "xai-test-key-123" || f.recorded(t, "autoupdater") != "1" {
		t.Error("the CLI gets the key and no auto-update through its environment")
	}
	cfg := f.recorded(t, "config.toml")
	for _, want := range []string{"[mcp_servers.docs]", "https://docs.example/mcp", "Bearer docs-token-456", "[mcp_servers.mine]", "my-mcp", "grok-build"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("the merged config lacks %q:\n%s", want, cfg)
		}
	}
	hd := f.workspace(t, ctx)
	if b, err := hd.FS().ReadFile(ctx, grokbuild.ConfigPath); err != nil || string(b) != userConfig {
		t.Errorf("the user's config is restored byte for byte after the run: %q, %v", b, err)
	}
	for _, e := range evs {
		if bytes.Contains(e.Marshal(), []byte("docs-token-456")) || bytes.Contains(e.Marshal(), []byte("xai-test-key")) {
			t.Fatalf("a secret reached an event: %s", e.Marshal())
		}
	}

	// The thread's next run resumes Grok's session, with the key from the
	// CLI's own login this time.
	rec2 := f.start(t, ctx, "testdata/legacy.ndjson", run.StartRequest{Prompt: "and now?", Auth: harness.AuthHost})
	evs2 := f.follow(t, ctx, rec2.ID, nil)
	if evs2[len(evs2)-1].Type != event.RunFinished {
		t.Fatalf("second run: %s", dump(evs2))
	}
	if argv := f.recorded(t, "argv"); !strings.Contains(argv, "--resume\n019a3f7e-2c41-7d2a-b7a5-5e0c7d1f9a10\n") {
		t.Errorf("the second run resumes the first run's session: %q", argv)
	}
	if got := f.recorded(t, "xai_api_key"); got != "<unset>" {
		t.Errorf("auth host removes the key from the CLI's environment: %q", got)
	}
}

// TestFakeCLIFailures checks the runs that end badly.
func TestFakeCLIFailures(t *testing.T) {
	cases := []struct {
		stream, code string
		status       store.RunStatus
	}{
		{"testdata/error.ndjson", "grok-error", store.RunFailed},
		// The record's status follows the CLI's exit code (0 here); the
		// events say the turn was cancelled.
		{"testdata/cancelled.ndjson", "cancelled", ""},
	}
	for _, c := range cases {
		t.Run(filepath.Base(c.stream), func(t *testing.T) {
			f := newFixture(t, &sandbox.Policy{}, false) // an empty policy asks
			ctx := testCtx(t)
			rec := f.start(t, ctx, c.stream, run.StartRequest{Prompt: "p"})
			evs := f.follow(t, ctx, rec.ID, nil)
			wellFormed(t, evs)
			if e := evs[len(evs)-1]; e.Type != event.RunError || e.Code != c.code {
				t.Fatalf("got %s", dump(evs))
			}
			if argv := f.recorded(t, "argv"); !strings.Contains(argv, "--permission-mode\ndefault\n") {
				t.Errorf("a policy that asks runs Grok in default mode: %q", argv)
			}
			stored, _, _ := f.r.Store().GetRun(ctx, rec.ID)
			if c.status != "" && stored.Status != c.status {
				t.Errorf("status %s", stored.Status)
			}
		})
	}
}

// TestCancelRestoresConfig cancels a run mid-stream: the wrapper must still
// put the workspace's configuration back.
func TestCancelRestoresConfig(t *testing.T) {
	f := newFixture(t, &sandbox.Policy{Default: sandbox.Allow}, false, sandbox.MCPServer{Name: "docs", URL: "https://d/mcp"})
	ctx := testCtx(t)
	rec := f.start(t, ctx, "testdata/basic.ndjson", run.StartRequest{Prompt: "p", Env: map[string]string{"FAKE_GROK_SLEEP": "30"}})
	cancelled := false
	evs := f.follow(t, ctx, rec.ID, func(e event.Event) {
		if e.Type == event.ReasoningContent && !cancelled {
			cancelled = true
			if _, err := f.r.Cancel(ctx, rec.ID); err != nil {
				t.Error(err)
			}
		}
	})
	if e := evs[len(evs)-1]; !e.Cancelled() {
		t.Fatalf("got %s", dump(evs))
	}
	hd := f.workspace(t, ctx)
	if b, err := hd.FS().ReadFile(ctx, grokbuild.ConfigPath); err != nil || string(b) != userConfig {
		t.Errorf("the config is restored after a cancel: %q, %v", b, err)
	}
}

// docsServer is a remote MCP server whose header names a secret.
var docsServer = sandbox.MCPServer{Name: "docs", URL: "https://docs.example/mcp", Headers: map[string]string{"Authorization": "Bearer ${secret:DOCS_TOKEN}"}}

func ensureReq(thread string) ensure.Request { return ensure.Request{Thread: thread} }

// TestNoSecretInTheDiff runs in a git work tree: the run's file.changed
// diff shows what the CLI changed, and never the secret-bearing config
// that was in place only while the CLI ran.
func TestNoSecretInTheDiff(t *testing.T) {
	f := newFixture(t, &sandbox.Policy{Default: sandbox.Allow}, true, docsServer)
	ctx := testCtx(t)
	rec := f.start(t, ctx, "testdata/basic.ndjson", run.StartRequest{Prompt: "p", Env: map[string]string{"FAKE_GROK_TOUCH": "README.md"}})
	evs := f.follow(t, ctx, rec.ID, nil)
	var change *event.FileChange
	for _, e := range evs {
		if e.Type == event.Custom && e.Name == event.FileChanged {
			change = &event.FileChange{}
			if err := json.Unmarshal(e.Value, change); err != nil {
				t.Fatal(err)
			}
		}
		if bytes.Contains(e.Marshal(), []byte("docs-token-456")) {
			t.Fatalf("a secret reached an event: %s", e.Marshal())
		}
	}
	if change == nil || strings.Join(change.Files, ",") != "README.md" {
		t.Fatalf("file.changed = %+v", change)
	}
	if !strings.Contains(f.recorded(t, "config.toml"), "docs-token-456") {
		t.Error("the CLI saw the merged config")
	}
}
