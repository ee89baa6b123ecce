package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/internal/testutil"
)

// crashAgent prints 10,000 numbered lines over about three seconds and
// exits 7.
const crashAgent = `i=1; while [ $i -le 10000 ]; do echo $i; [ $((i % 1000)) -eq 0 ] && sleep 0.3; i=$((i+1)); done; exit 7`

// TestCrashTakeover kills the process driving a run with SIGKILL mid-run
// and attaches from a second process: the event log must hold every line
// exactly once, in order, and the run must end with the agent's exit code.
// CORRAL_CRASH_TRIALS sets the number of trials per provider (default 20).
func TestCrashTakeover(t *testing.T) {
	trials := crashTrialsFromEnv(20)
	for _, prov := range []string{"local", "docker"} {
		t.Run(prov, func(t *testing.T) { crashTrials(t, crashConfig(t, prov), trials) })
	}
}

// crashTrials writes yaml as a corral.yaml and runs crashTrial on it
// trials times, each a subtest.
func crashTrials(t *testing.T, yaml string, trials int) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "corral.yaml")
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range trials {
		t.Run(fmt.Sprint("trial", i), func(t *testing.T) { crashTrial(t, cfg, i) })
	}
}

// crashTrialsFromEnv is CORRAL_CRASH_TRIALS when it is a positive number,
// else def.
func crashTrialsFromEnv(def int) int {
	if v, err := strconv.Atoi(os.Getenv("CORRAL_CRASH_TRIALS")); err == nil && v > 0 {
		return v
	}
	return def
}

// crashConfig is the corral.yaml of TestCrashTakeover on prov.
func crashConfig(t *testing.T, prov string) string {
	t.Helper()
	switch prov {
	case "local":
		return fmt.Sprintf("id: crash\nprovider:\n  name: local\n  local: {baseDir: %s}\n", filepath.Join(t.TempDir(), "sandboxes"))
	case "docker":
		testutil.NeedDocker(t)
		return "id: crash\nprovider:\n  name: docker\n  docker: {image: " + testutil.DockerTestImage + "}\n"
	}
	t.Fatalf("no crash config for %s", prov)
	return ""
}

func crashTrial(t *testing.T, cfg string, trial int) {
	dir := t.TempDir()
	storeURL := "sqlite:" + filepath.Join(dir, "state.db")
	common := []string{"--config", cfg, "--store", storeURL}
	env := append(os.Environ(), "CORRAL_LEASE_TTL=1s", "XDG_STATE_HOME="+dir)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	thread := fmt.Sprintf("crash-%d", trial)
	t.Cleanup(func() {
		down := exec.Command(corralBin, append([]string{"down", "--thread", thread}, common...)...)
		down.Env = env
		_ = down.Run()
	})

	a := exec.CommandContext(ctx, corralBin, append(append([]string{"run", "--thread", thread}, common...), "--", "sh", "-c", crashAgent)...)
	a.Env = env
	stdout, err := a.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := a.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	runID := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 3 && f[0] == "corral:" && f[1] == "run" {
				runID <- f[2]
			}
		}
	}()
	// Kill the driver at a different point in each trial.
	killAt := 150 + (trial*977)%9000
	sc := bufio.NewScanner(stdout)
	seen := 0
	for sc.Scan() {
		seen++
		if seen >= killAt {
			break
		}
	}
	if err := a.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait()
	var id string
	select {
	case id = <-runID:
	case <-time.After(10 * time.Second):
		t.Fatal("no run id from the first process")
	}

	b := exec.CommandContext(ctx, corralBin, append(append([]string{"attach", id}, common...), "--from", "0")...)
	b.Env = env
	// A hung attach dumps its goroutines (SIGQUIT) so the failure says
	// where it hung.
	b.Cancel = func() error { return b.Process.Signal(syscall.SIGQUIT) }
	b.WaitDelay = 5 * time.Second
	var berr strings.Builder
	b.Stderr = &berr
	out, err := b.Output()
	if ctx.Err() != nil {
		t.Fatalf("attach hung (killed after lines %d); its stderr:\n%s", killAt, tail(berr.String(), 20000))
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != 7 {
		t.Fatalf("attach exited %d, want the agent's 7 (stdout %d bytes)", code, len(out))
	}
	if got := strings.Count(string(out), "\n"); got != 10000 {
		t.Errorf("attach --from 0 printed %d lines, want 10000", got)
	}

	logs := exec.Command(corralBin, append([]string{"logs", id, "--json"}, common...)...)
	logs.Env = env
	raw, err := logs.Output()
	if err != nil {
		t.Fatal(err)
	}
	// The log's text, whatever its event boundaries (past the first 4096
	// lines, deltas pending together are merged), must be 1..10000 once.
	var text strings.Builder
	var last event.Event
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		_, js, _ := strings.Cut(line, " ")
		var ev event.Event
		if err := json.Unmarshal([]byte(js), &ev); err != nil {
			t.Fatalf("bad event %q: %v", line, err)
		}
		last = ev
		if ev.Type == event.TextMessageContent {
			text.WriteString(ev.Delta)
		}
	}
	got := strings.Split(strings.TrimSuffix(text.String(), "\n"), "\n")
	for i, l := range got {
		if l != fmt.Sprint(i+1) {
			t.Fatalf("event log: got line %q where %d was due (killed after %d lines)", l, i+1, killAt)
		}
	}
	if len(got) != 10000 {
		t.Fatalf("event log holds %d lines, want 10000", len(got))
	}
	if last.Type != event.RunError || last.ExitCode == nil || *last.ExitCode != 7 {
		t.Errorf("last event %+v, want RUN_ERROR with exit code 7", last)
	}
	ps := exec.Command(corralBin, append([]string{"ps", "--all", "--json"}, common...)...)
	ps.Env = env
	raw, err = ps.Output()
	if err != nil {
		t.Fatal(err)
	}
	var runs []struct {
		ID          string `json:"ID"`
		Status      string `json:"Status"`
		ExitCode    *int   `json:"ExitCode"`
		DriverEpoch int64  `json:"DriverEpoch"`
	}
	if err := json.Unmarshal(raw, &runs); err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != "failed" || runs[0].ExitCode == nil || *runs[0].ExitCode != 7 || runs[0].DriverEpoch < 2 {
		t.Errorf("run record %+v", runs)
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
