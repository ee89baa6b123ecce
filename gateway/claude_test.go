package gateway_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/claudecode"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// TestRealClaudeThroughGateway runs the real Claude Code CLI with a
// brokered ANTHROPIC_API_KEY against the fake model, which accepts only
// the real key: the CLI authenticates through the gateway and completes a
// tool-using run, and the tool it runs is memscan, which scans the CLI's
// own process (and every other process of the run) for the key.
func TestRealClaudeThroughGateway(t *testing.T) {
	bin := testutil.AgentBin(t, "claude")
	key := canary()
	scan := buildMemscan(t)
	marker := canary()[10:]
	cmd := scan + " " + strings.Join(memscanArgs(key), " ") + " -marker CORRAL_SCAN=" + marker
	model := fakemodel.New(t, fakemodel.Script{APIKey: key, Turns: []fakemodel.Turn{{Command: cmd}, {Text: "Scanned; done."}}})
	base := t.TempDir()
	p, err := local.New(local.Options{BaseDir: base})
	if err != nil {
		t.Fatal(err)
	}
	secrets, _ := sandbox.NewSecrets(map[string]string{claudecode.APIKeySecret: key})
	secrets, err = secrets.WithBrokers(map[string]sandbox.Broker{claudecode.APIKeySecret: {Hosts: []string{model.URL}, Header: "x-api-key"}})
	if err != nil {
		t.Fatal(err)
	}
	def := &sandbox.Definition{ID: "claude", Provider: p, Workspace: &sandbox.Workspace{Secrets: secrets}}
	k := newKit(t, def, nil, []harness.Harness{claudecode.Harness{}}...)
	home := t.TempDir()
	ctx := ctxT(t)
	rec, err := k.r.Start(ctx, run.StartRequest{Definition: "claude", Harness: claudecode.Name, Prompt: "scan the memory", Model: "claude-sonnet-4-5",
		Options: map[string]string{"executable": bin, "isSandbox": "true"},
		Env:     map[string]string{"HOME": home, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1", "CORRAL_SCAN": marker}})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.r.Wait(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	evs, err := k.st.ReadEvents(ctx, rec.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, e := range evs {
		all.Write(e.Data)
		all.WriteByte('\n')
	}
	got, _, _ := k.st.GetRun(ctx, rec.ID)
	if got.Status != store.RunCompleted {
		t.Fatalf("run %s (%s); %d model requests, %d refused for the key\n%s", got.Status, got.Error, len(model.ModelRequests()), model.Unauthorized(), all.String())
	}
	if n := model.Unauthorized(); n != 0 {
		t.Errorf("%d requests reached the model without the real key", n)
	}
	if len(model.ModelRequests()) < 2 {
		t.Errorf("%d model requests, want the tool call and the answer", len(model.ModelRequests()))
	}
	m := regexp.MustCompile(`scanned (\d+) processes, (\d+) bytes, (\d+) found`).FindStringSubmatch(all.String())
	if m == nil || m[1] == "0" || m[3] != "0" {
		t.Fatalf("memory scan of the CLI's processes: %q\n%s", m, all.String())
	}
	t.Logf("claude through the gateway: %d model requests, memscan read %s processes, %s bytes, found the key 0 times", len(model.ModelRequests()), m[1], m[2])
	if strings.Contains(all.String(), key) || strings.Contains(all.String(), "[secret:") {
		t.Error("the events hold the key (or a redaction of it)")
	}
	for _, dir := range []string{base, home, k.jdir, k.dbPath + "-wal", k.dbPath} {
		if hit := grepTree(t, dir, key); hit != "" {
			t.Errorf("the key is in %s", hit)
		}
	}
}
