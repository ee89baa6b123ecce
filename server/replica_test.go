package server_test

// Two `corral serve` processes share one PostgreSQL schema. A client
// streams a run from replica A, A is killed with SIGKILL mid-run, and the
// client goes on from replica B with its last event id: B takes the run
// over (its lease runs out after CORRAL_LEASE_TTL=1s) and the client sees
// every line exactly once, in order, to the end of a completed run. It
// runs with sandboxes on local and on the real Kubernetes test cluster
// (Pods, and agent-sandbox's claims).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/client"
	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/provider/kubernetes"
	"github.com/d10ffeed/corral/provider/kubernetes/k8stest"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/pgstore"
	"github.com/d10ffeed/corral/store/pgstore/pgtest"
)

// replicaAgent prints 2,000 numbered lines over about three seconds.
const replicaAgent = `i=1; while [ $i -le 2000 ]; do echo $i; [ $((i%200)) -eq 0 ] && sleep 0.3; i=$((i+1)); done`

var (
	buildOnce sync.Once
	corralBin string
	buildErr  error
	buildDir  string
)

// buildCorral builds the corral binary once per test binary run.
func buildCorral(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "corral-server-test-")
		if buildErr != nil {
			return
		}
		corralBin = filepath.Join(buildDir, "corral")
		cmd := exec.Command("go", "build", "-o", corralBin, "../cmd/corral")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ../cmd/corral: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return corralBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// daemon is one `corral serve` process.
type daemon struct {
	name    string
	cmd     *exec.Cmd
	URL     string
	Token   string // from the page address it printed
	PageURL string // the page address it printed, with the token
	mu      sync.Mutex
	log     strings.Builder // its stderr
	done    chan struct{}   // closed when it exited
}

var (
	servingRE = regexp.MustCompile(`^corral: serving on (http://\S+) `)
	pageRE    = regexp.MustCompile(`^corral: open the web page at ((http://\S+)/\?token=([0-9a-f]{48})) `)
)

// startDaemon starts `corral serve` on a free loopback port, with args
// added, and waits for its "serving on" line and the page's address with
// its token (which follows; none with --no-auth). The process is killed
// when the test ends.
func startDaemon(t *testing.T, bin, name, storeURL, cfg, stateDir string, args ...string) *daemon {
	t.Helper()
	d := &daemon{name: name, done: make(chan struct{})}
	d.cmd = exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--store", storeURL, "--config", cfg,
		"--reap-interval", "1h"}, args...)...)
	env := []string{"CORRAL_LEASE_TTL=1s", "XDG_STATE_HOME=" + stateDir}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CORRAL_") && !strings.HasPrefix(kv, "XDG_STATE_HOME=") {
			env = append(env, kv)
		}
	}
	d.cmd.Env = env
	stderr, err := d.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	noAuth := slices.Contains(args, "--no-auth") // no page line with a token then
	addr := make(chan [3]string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		serving := ""
		for sc.Scan() {
			line := sc.Text()
			d.mu.Lock()
			d.log.WriteString(line + "\n")
			d.mu.Unlock()
			if m := servingRE.FindStringSubmatch(line); m != nil {
				serving = m[1]
				if noAuth {
					select {
					case addr <- [3]string{serving, "", ""}:
					default:
					}
				}
			}
			if m := pageRE.FindStringSubmatch(line); m != nil && m[2] == serving {
				select {
				case addr <- [3]string{m[2], m[3], m[1]}:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		_ = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		d.kill(t)
		if t.Failed() {
			t.Logf("replica %s stderr:\n%s", d.name, d.stderr())
		}
	})
	select {
	case a := <-addr:
		d.URL, d.Token, d.PageURL = a[0], a[1], a[2]
	case <-d.done:
		t.Fatalf("replica %s exited before serving:\n%s", name, d.stderr())
	case <-time.After(30 * time.Second):
		t.Fatalf("replica %s did not print its address within 30s:\n%s", name, d.stderr())
	}
	return d
}

func (d *daemon) stderr() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}

// kill sends SIGKILL and waits for the process to be gone.
func (d *daemon) kill(t *testing.T) {
	t.Helper()
	_ = d.cmd.Process.Kill()
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		t.Errorf("replica %s (pid %d) did not exit after SIGKILL", d.name, d.cmd.Process.Pid)
	}
}

func (d *daemon) alive() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// withSearchPath returns the URL with search_path set to the schema.
func withSearchPath(t *testing.T, raw, schema string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func TestTwoReplicasOnePostgres(t *testing.T) {
	pgURL := pgtest.URL(t)
	trials := 10
	if v, err := strconv.Atoi(os.Getenv("CORRAL_REPLICA_TRIALS")); err == nil && v > 0 {
		trials = v
	}
	bin := buildCorral(t)
	for _, c := range []struct {
		provider string
		trials   int
	}{
		{"local", trials},
		// Each trial makes a Pod; fewer unless asked for.
		{"kubernetes", min(trials, 3)},
		{"kubernetes-sandbox", min(trials, 3)}, // agent-sandbox's claims
	} {
		t.Run(c.provider, func(t *testing.T) {
			cfg, ns := replicaConfig(t, c.provider)
			for i := range c.trials {
				t.Run(fmt.Sprint("trial", i), func(t *testing.T) { replicaTrial(t, bin, pgURL, cfg, i) })
			}
			if ns != "" {
				// The runs' sandboxes were Pods on the cluster.
				pods, err := k8stest.Client(t).CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: kubernetes.LabelManaged + "=true"})
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("corral's pods in namespace %s after %d trials: %d", ns, c.trials, len(pods.Items))
				if len(pods.Items) != c.trials {
					t.Errorf("%d pods of corral's in %s, want one per trial's thread (%d)", len(pods.Items), ns, c.trials)
				}
			}
		})
	}
}

// replicaConfig writes the daemons' corral.yaml for a provider: local in
// a temporary directory, or kubernetes on the real test cluster in a
// namespace of the test's own (skipped, or failed under CI=true, without
// the cluster). For kubernetes it also returns the namespace.
func replicaConfig(t *testing.T, provider string) (cfg, ns string) {
	t.Helper()
	dir := t.TempDir()
	var yaml string
	switch provider {
	case "local":
		yaml = fmt.Sprintf("provider:\n  name: local\n  local: {baseDir: %s}\n", filepath.Join(dir, "sandboxes"))
	case "kubernetes", "kubernetes-sandbox":
		kc := k8stest.Require(t)
		mode := "pods"
		if provider == "kubernetes-sandbox" {
			k8stest.RequireAgentSandbox(t)
			mode = "sandbox"
		}
		ns = k8stest.Namespace(t)
		yaml = fmt.Sprintf("provider:\n  name: kubernetes\n  kubernetes: {kubeconfig: %q, namespace: %s, mode: %s}\n", kc, ns, mode)
	default:
		t.Fatalf("no replica config for provider %q", provider)
	}
	cfg = filepath.Join(dir, "corral.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg, ns
}

func replicaTrial(t *testing.T, bin, pgURL, cfg string, trial int) {
	ctx := testCtx(t, 2*time.Minute)
	schema := pgtest.FreshSchema(t, pgURL)
	st, err := pgstore.Open(ctx, pgURL, pgstore.Options{Schema: schema}) // creates and migrates the schema
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	storeURL := withSearchPath(t, pgURL, schema)
	stateDir := t.TempDir()
	a := startDaemon(t, bin, "A", storeURL, cfg, stateDir)
	b := startDaemon(t, bin, "B", storeURL, cfg, stateDir)

	if a.Token != b.Token {
		t.Fatalf("two daemons with one state directory print different tokens")
	}
	ca, err := client.New(a.URL, a.Token)
	if err != nil {
		t.Fatal(err)
	}
	ca.Retry = 300 * time.Millisecond // A is gone for good: give up on it fast
	cb, err := client.New(b.URL, b.Token)
	if err != nil {
		t.Fatal(err)
	}

	r, err := ca.Start(ctx, api.StartRun{Thread: fmt.Sprintf("replica-%d", trial), Prompt: replicaAgent})
	if err != nil {
		t.Fatal(err)
	}
	// Kill A at a different line in each trial (well before the agent's
	// last line, so the run is still going).
	killAt := 50 + (trial*397)%1500
	var (
		lines   []string
		last    int64
		killed  bool
		onA     int
		lastEv  event.Event
		killedT time.Time
	)
	fn := func(e store.Event) error {
		if e.Seq != last+1 {
			return fmt.Errorf("event seq %d after %d: a gap or a repeat", e.Seq, last)
		}
		last = e.Seq
		ev, err := event.Unmarshal(e.Data)
		if err != nil {
			return err
		}
		lastEv = ev
		if ev.Type == event.TextMessageContent {
			lines = append(lines, strings.TrimSuffix(ev.Delta, "\n"))
		}
		if !killed && len(lines) >= killAt {
			if err := a.cmd.Process.Kill(); err != nil {
				return err
			}
			killed, killedT, onA = true, time.Now(), len(lines)
		}
		return nil
	}
	errA := ca.Events(ctx, r.ID, 0, fn)
	if !killed {
		t.Fatalf("the stream from A ended (%v) after %d lines, before line %d", errA, len(lines), killAt)
	}
	if errA == nil {
		t.Fatalf("the stream from A ended cleanly after A was killed (%d lines)", len(lines))
	}
	<-a.done
	seenOnA, eventsOnA := len(lines), last

	// Go on from B with the last event id.
	if err := cb.Events(ctx, r.ID, last, fn); err != nil {
		t.Fatalf("streaming from B after %d: %v", last, err)
	}
	took := time.Since(killedT)
	sameLines(t, lines, numbered("", 2000))
	if lastEv.Type != event.RunFinished {
		t.Fatalf("the last event is %s, want RUN_FINISHED", lastEv.Type)
	}

	got, err := cb.Run(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != "completed" || got.ExitCode == nil || *got.ExitCode != 0 || got.LastSeq != last {
		t.Fatalf("run via B: %+v, want completed, exit 0, lastSeq %d", got, last)
	}
	if got.DriverEpoch < 2 {
		t.Fatalf("run via B has driver epoch %d: B never took it over", got.DriverEpoch)
	}
	// The stored log itself has every line once.
	stored, err := cb.Logs(ctx, r.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var storedLines []string
	for _, e := range stored {
		if ev, err := event.Unmarshal(e.Data); err == nil && ev.Type == event.TextMessageContent {
			storedLines = append(storedLines, strings.TrimSuffix(ev.Delta, "\n"))
		}
	}
	sameLines(t, storedLines, numbered("", 2000))
	if !b.alive() {
		t.Fatalf("replica B died:\n%s", b.stderr())
	}
	takeovers := scrape(t, b.URL, b.Token, "corral_takeovers_total")
	t.Logf("trial %d: killed A at line %d (%d lines, %d events read from A); B finished the run %v later (epoch %d, %d events; B's corral_takeovers_total %s)",
		trial, onA, seenOnA, eventsOnA, took.Round(time.Millisecond), got.DriverEpoch, last, takeovers)

	b.kill(t)
	if a.alive() || b.alive() {
		t.Fatal("a replica is still alive at the end of the trial")
	}
}

// scrape returns the value of one sample of the daemon's /metrics.
func scrape(t *testing.T, base, token, name string) string {
	t.Helper()
	_, body := do(t, base, request{Method: "GET", Path: "/metrics", Token: token})
	for _, l := range strings.Split(string(body), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == name {
			return f[1]
		}
	}
	return "?"
}
