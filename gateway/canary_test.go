package gateway_test

import (
	"bytes"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// brokerAgent calls the model API through the gateway with the placeholder
// it was given, then scans the memory of its own process tree (the
// processes holding $CORRAL_SCAN, a sleeping child among them) for the
// real value with memscan, which is given only the value's hashes.
const brokerAgent = `set -u
echo "placeholder=$ANTHROPIC_API_KEY"
echo "base=$ANTHROPIC_BASE_URL"
code=$(curl -sS -o resp.json -w '%{http_code}' -H "x-api-key: $ANTHROPIC_API_KEY" -H 'anthropic-version: 2023-06-01' \
  -H 'content-type: application/json' -d '{"model":"fake-model","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}' \
  "$ANTHROPIC_BASE_URL/v1/messages")
echo "status=$code"
tr -d '\n' < resp.json; echo
sleep 30 & child=$!
"$MEMSCAN" $SCAN_ARGS -marker "CORRAL_SCAN=$CORRAL_SCAN"
kill $child
`

// TestBrokeredSecretNeverInSandbox is the secret-canary test of brokered
// secrets on the local provider: the agent authenticates to the fake model
// (which checks the real key) through the gateway, while the value is in
// no process memory of the agent's tree, no file of the sandbox or the
// journal, no event and no byte of the SQLite store; its placeholder is
// refused once the run has ended and from another run's route.
func TestBrokeredSecretNeverInSandbox(t *testing.T) {
	key := canary()
	model := fakemodel.New(t, fakemodel.Script{APIKey: key, Turns: []fakemodel.Turn{{Text: "hello through the gateway"}}})
	base := t.TempDir()
	p, err := local.New(local.Options{BaseDir: base})
	if err != nil {
		t.Fatal(err)
	}
	secrets, _ := sandbox.NewSecrets(map[string]string{"ANTHROPIC_API_KEY": key, "PLAIN": "plain-value"})
	secrets, err = secrets.WithBrokers(map[string]sandbox.Broker{"ANTHROPIC_API_KEY": {Hosts: []string{model.URL}, Header: "x-api-key"}})
	if err != nil {
		t.Fatal(err)
	}
	def := &sandbox.Definition{ID: "d", Provider: p, Workspace: &sandbox.Workspace{Secrets: secrets}}
	k := newKit(t, def, nil)
	scan := buildMemscan(t)
	ctx := ctxT(t)
	marker := canary()[10:]
	rec, text := k.complete(t, run.StartRequest{Definition: "d", Harness: command.Name, Args: []string{"sh", "-c", brokerAgent},
		Env: map[string]string{"MEMSCAN": scan, "SCAN_ARGS": strings.Join(memscanArgs(key), " "), "CORRAL_SCAN": marker}})
	if !strings.Contains(text, "status=200") || !strings.Contains(text, "hello through the gateway") {
		t.Fatalf("the agent did not get the model's answer through the gateway:\n%s", text)
	}
	if n := model.Unauthorized(); n != 0 {
		t.Errorf("%d requests reached the model without the real key", n)
	}
	m := regexp.MustCompile(`scanned (\d+) processes, (\d+) bytes, (\d+) found`).FindStringSubmatch(text)
	if m == nil || m[1] == "0" || m[3] != "0" {
		t.Fatalf("memory scan: %q\n%s", m, text)
	}
	t.Logf("memscan: %s processes, %s bytes read, the value found 0 times", m[1], m[2])
	if strings.Contains(text, "[secret:ANTHROPIC_API_KEY]") {
		t.Error("the scrubber redacted the real value from the agent's output: the agent held it")
	}
	// No byte of the sandbox, the journals or the store holds the value.
	for _, dir := range []string{base, filepath.Dir(k.dbPath), k.journalDir(t)} {
		if hit := grepTree(t, dir, key); hit != "" {
			t.Errorf("the value is in %s", hit)
		}
	}
	var recs []string
	for len(k.recs) > 0 {
		r := <-k.recs
		recs = append(recs, r.Host+" "+http.StatusText(r.Status))
		if r.Refused != "" || r.Status != 200 || r.Bytes == 0 {
			t.Errorf("gateway record %+v", r)
		}
	}
	if len(recs) != 1 {
		t.Errorf("gateway records %v, want the one model call", recs)
	}

	// The agent printed its placeholder: the events hold it redacted
	// (it is worth the key while the run lives).
	ph := []string{"", k.g.Placeholder(mustRun(t, k, rec.ID), "ANTHROPIC_API_KEY")}
	if strings.Contains(text, ph[1]) || !strings.Contains(text, "placeholder=[secret:ANTHROPIC_API_KEY_PLACEHOLDER]") {
		t.Errorf("the placeholder is not redacted from the events:\n%s", text)
	}
	// The placeholder is worthless now: its run ended.
	route, err := k.g.BaseURL("local", rec.ID, model.URL)
	if err != nil {
		t.Fatal(err)
	}
	if status, body := call(t, route, ph[1]); status != http.StatusForbidden || !strings.Contains(body, "ended") {
		t.Errorf("replay after the run: %d %q, want 403 (run ended)", status, body)
	}

	// A live run: its own placeholder passes, the ended run's does not.
	rec2, err := k.r.Start(ctx, run.StartRequest{Definition: "d", Harness: command.Name, Args: []string{"sh", "-c", `echo "placeholder=$ANTHROPIC_API_KEY"; test -z "${PLAIN:-}" && echo noplain; sleep 60`}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = k.r.Cancel(ctx, rec2.ID) })
	waitFor(t, k, rec2.ID, regexp.MustCompile(`(placeholder=)`))
	ph2 := k.g.Placeholder(mustRun(t, k, rec2.ID), "ANTHROPIC_API_KEY")
	route2, _ := k.g.BaseURL("local", rec2.ID, model.URL)
	if status, _ := call(t, route2, ph2); status != http.StatusOK {
		t.Errorf("the live run's own placeholder: %d, want 200", status)
	}
	if status, body := call(t, route2, ph[1]); status != http.StatusForbidden || !strings.Contains(body, "another run") {
		t.Errorf("the ended run's placeholder on a live run's route: %d %q, want 403", status, body)
	}
	forged := ph2[:len(ph2)-4] + "AAAA"
	if status, _ := call(t, route2, forged); status != http.StatusForbidden {
		t.Errorf("a forged placeholder: %d, want 403", status)
	}
	if status, _ := call(t, route2, ""); status != http.StatusUnauthorized {
		t.Errorf("no placeholder: %d, want 401 (asking for credentials)", status)
	}
	other, _ := k.g.BaseURL("local", rec2.ID, "http://127.0.0.1:1")
	if status, body := call(t, other, ph2); status != http.StatusForbidden || !strings.Contains(body, "may not be sent") {
		t.Errorf("a host the broker does not name: %d %q, want 403", status, body)
	}
	if hit := grepTree(t, base, key); hit != "" {
		t.Errorf("the value is in %s", hit)
	}
}

// call posts a one-message request to route with the placeholder.
func call(t *testing.T, route, ph string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", route+"/v1/messages", strings.NewReader(`{"model":"fake-model","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("x-api-key", ph)
	req.Header.Set("content-type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// runText is the text of a run's events.
func runText(t *testing.T, k *kit, id string) string {
	t.Helper()
	evs, err := k.st.ReadEvents(ctxT(t), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range evs {
		ev, err := event.Unmarshal(e.Data)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(ev.Delta)
	}
	return b.String()
}

// waitFor waits for re in a live run's text and returns its first group.
func waitFor(t *testing.T, k *kit, id string, re *regexp.Regexp) string {
	t.Helper()
	ctx := ctxT(t)
	for ctx.Err() == nil {
		if m := re.FindStringSubmatch(runText(t, k, id)); m != nil {
			return m[1]
		}
		select {
		case <-ctx.Done():
		case <-k.tick():
		}
	}
	t.Fatalf("run %s never printed %s", id, re)
	return ""
}

// grepTree returns the first file under dir holding value, or "".
func grepTree(t *testing.T, dir, value string) string {
	t.Helper()
	hit := ""
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || hit != "" || !d.Type().IsRegular() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(value)) {
			hit = p
		}
		return nil
	})
	return hit
}

// TestMemscanFindsAPlantedValue is the scanner's control: a process that
// holds the value in its environment is found.
func TestMemscanFindsAPlantedValue(t *testing.T) {
	key, marker := canary(), canary()
	scan := buildMemscan(t)
	ctx := ctxT(t)
	holder := exec.CommandContext(ctx, "sleep", "30")
	holder.Env = []string{"PLANTED=" + key, "CORRAL_SCAN=" + marker}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	out, err := exec.CommandContext(ctx, scan, append(memscanArgs(key), "-marker", "CORRAL_SCAN="+marker)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`scanned 1 processes, \d+ bytes, [1-9]\d* found`).Match(out) {
		t.Fatalf("memscan missed the planted value: %s", out)
	}
}

// mustRun reads a run record.
func mustRun(t *testing.T, k *kit, id string) store.Run {
	t.Helper()
	rec, ok, err := k.st.GetRun(ctxT(t), id)
	if err != nil || !ok {
		t.Fatalf("run %s: %v %v", id, ok, err)
	}
	return rec
}
