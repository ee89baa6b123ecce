package sqlitestore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/sqlitestore"
)

// waitFor polls cond (a hang guard, not a verdict: the condition is
// reached whatever the machine's speed).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after a minute", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGroupCommitFailureIsItsOwn: writes queued together run as one
// transaction; the ones that fail (a duplicate id, a failed fence, a write
// that fails after its own INSERT) see their own error only, their changes
// are rolled back, and every other write of the batch lands.
func TestGroupCommitFailureIsItsOwn(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "corral.db")
	s := open(t, path)
	defer s.Close()
	for _, id := range []string{"dup", "fenced"} {
		if err := s.CreateRun(ctx, store.Run{ID: id, ThreadID: "t", Prompt: "first"}); err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("boom after its insert")
	epoch := int64(7)
	type write struct {
		name  string
		do    func() error
		check func(err error) bool // the caller's own outcome
	}
	ok := func(err error) bool { return err == nil }
	var writes []write
	const good = 16
	for i := range good {
		id := fmt.Sprintf("ok-%d", i)
		writes = append(writes, write{"create " + id, func() error {
			return s.CreateRun(ctx, store.Run{ID: id, ThreadID: "t"})
		}, ok})
	}
	writes = append(writes,
		write{"create dup", func() error {
			return s.CreateRun(ctx, store.Run{ID: "dup", ThreadID: "t", Prompt: "second"})
		}, func(err error) bool { return sandbox.CodeOf(err) == sandbox.AlreadyExists }},
		write{"update fenced at a wrong epoch", func() error {
			_, err := s.UpdateRun(ctx, "fenced", store.RunPatch{Status: store.Set(store.RunFailed), IfEpoch: &epoch})
			return err
		}, func(err error) bool { return sandbox.CodeOf(err) == sandbox.FailedPrecondition }},
		write{"insert, then fail", func() error {
			return sqlitestore.WriteSQL(ctx, s, boom,
				`INSERT INTO corral_runs (id, thread_id, status, created_at, updated_at) VALUES ('rolled-back', 't', 'running', 0, 0)`,
				`UPDATE corral_runs SET prompt = 'overwritten' WHERE id = 'dup'`)
		}, func(err error) bool { return errors.Is(err, boom) }},
		write{"put instance", func() error {
			return s.PutInstance(ctx, store.Instance{Key: "k", Provider: "p", ProviderSandboxID: "x", ThreadID: "t"})
		}, ok},
	)

	release := sqlitestore.HoldWriter(s)
	before := s.WriteStats()
	errs := make([]error, len(writes))
	var wg sync.WaitGroup
	for i, w := range writes {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = w.do() }()
	}
	waitFor(t, "every write to queue", func() bool { return sqlitestore.Waiting(s) == int64(len(writes)) })
	release()
	wg.Wait()
	after := s.WriteStats()

	failed := 0
	for i, w := range writes {
		if errs[i] != nil {
			failed++
		}
		if !w.check(errs[i]) {
			t.Errorf("%s: got %v", w.name, errs[i])
		}
	}
	// Usually one transaction; a write still on its way to the queue when
	// the writer is released may take a second one.
	if b, n := after.Batches-before.Batches, after.Writes-before.Writes; b < 1 || b > 2 || n != int64(len(writes)) {
		t.Errorf("the %d queued writes ran in %d transactions (%d writes), want 1 or 2", len(writes), b, n)
	}
	// What landed, seen through another handle (so: committed).
	s2 := open(t, path)
	defer s2.Close()
	landed := 0
	for i := range good {
		if _, found, err := s2.GetRun(ctx, fmt.Sprintf("ok-%d", i)); err != nil || !found {
			t.Errorf("ok-%d: found=%v %v", i, found, err)
		} else {
			landed++
		}
	}
	if _, found, _ := s2.GetInstance(ctx, "k"); !found {
		t.Error("the instance did not land")
	} else {
		landed++
	}
	if _, found, _ := s2.GetRun(ctx, "rolled-back"); found {
		t.Error("the failed write's INSERT landed")
	}
	if r, _, _ := s2.GetRun(ctx, "dup"); r.Prompt != "first" {
		t.Errorf("dup's prompt = %q, want first (the failed writes changed it)", r.Prompt)
	}
	if r, _, _ := s2.GetRun(ctx, "fenced"); r.Status != store.RunRunning {
		t.Errorf("fenced is %s, want running", r.Status)
	}
	t.Logf("%d writes in %d transaction: %d failed with their own error, %d of %d others landed",
		after.Writes-before.Writes, after.Batches-before.Batches, failed, landed, len(writes)-failed)
}

// ackWriter writes runs, their events and their end in a loop and calls
// ack after each write the store acknowledged, until a write fails.
func ackWriter(ctx context.Context, s store.Store, prefix string, ack func(kind, id string)) error {
	for i := 0; ; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if err := s.CreateRun(ctx, store.Run{ID: id, ThreadID: "t"}); err != nil {
			return err
		}
		ack("run", id)
		evs := []store.NewEvent{{Type: "a"}, {Type: "b", Data: []byte(`{"n":1}`)}, {Type: "c"}}
		if err := s.AppendEvents(ctx, id, 0, 1, evs); err != nil {
			return err
		}
		ack("events", id)
		if _, err := s.UpdateRun(ctx, id, store.RunPatch{Status: store.Set(store.RunCompleted)}); err != nil {
			return err
		}
		ack("done", id)
	}
}

// checkAcked fails for every acknowledged write that s does not hold.
func checkAcked(t *testing.T, s store.Store, acked map[string]string) (lost int) {
	t.Helper()
	ctx := t.Context()
	for id, kind := range acked {
		r, found, err := s.GetRun(ctx, id)
		if err != nil || !found {
			t.Errorf("acknowledged run %s (%s): found=%v %v", id, kind, found, err)
			lost++
			continue
		}
		if kind == "events" || kind == "done" {
			if n, err := s.LastSeq(ctx, id); err != nil || n != 3 {
				t.Errorf("acknowledged events of %s: last seq %d, %v", id, n, err)
				lost++
			}
		}
		if kind == "done" && r.Status != store.RunCompleted {
			t.Errorf("acknowledged end of %s: status %s", id, r.Status)
			lost++
		}
	}
	return lost
}

// The environment of a crash child: the database it writes to.
const envCrashChild = "CORRAL_SQLITESTORE_CRASH_CHILD"

// crashChild writes with 16 writers and prints each acknowledged write
// ("run ID", "events ID", "done ID") until it is killed.
func crashChild() int {
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, os.Getenv(envCrashChild), sqlitestore.Options{})
	if err != nil {
		fmt.Println("error", err)
		return 2
	}
	var mu sync.Mutex
	for g := range 16 {
		go func() {
			err := ackWriter(ctx, s, fmt.Sprintf("w%d", g), func(kind, id string) {
				mu.Lock()
				defer mu.Unlock()
				fmt.Println(kind, id) // os.Stdout is unbuffered: printed means told
			})
			fmt.Println("error", err)
		}()
	}
	select {}
}

// TestGroupCommitCrashLosesNoAcknowledgedWrite: a process writing with 16
// writers is killed (SIGKILL) mid-load; every write it was told had
// committed is in the file afterwards.
func TestGroupCommitCrashLosesNoAcknowledgedWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corral.db")
	open(t, path).Close() // migrations done before the child starts
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envCrashChild+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	acked := map[string]string{}
	writes := 0
	sc := bufio.NewScanner(out)
	const killAfter = 600
	for sc.Scan() {
		kind, id, _ := strings.Cut(sc.Text(), " ")
		if kind == "error" {
			t.Fatalf("child: %s", id)
		}
		acked[id] = kind
		writes++
		if writes == killAfter {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = cmd.Wait()
	if writes < killAfter {
		t.Fatalf("the child acknowledged %d writes, want at least %d", writes, killAfter)
	}
	s := open(t, path)
	defer s.Close()
	all, err := s.ListRuns(t.Context(), store.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	lost := checkAcked(t, s, acked)
	t.Logf("killed after %d acknowledged writes (%d printed in all, %d runs): %d lost; the file holds %d runs",
		killAfter, writes, len(acked), lost, len(all))
}

// TestGroupCommitCloseMidLoad: Close while 16 writers write: every write
// that returned nil is in the file when it is opened again, and every
// other write failed as FailedPrecondition (closed).
func TestGroupCommitCloseMidLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corral.db")
	s := open(t, path)
	var mu sync.Mutex
	acked := map[string]string{}
	writes := 0
	reached := make(chan struct{})
	errs := make([]error, 16)
	var wg sync.WaitGroup
	for g := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[g] = ackWriter(t.Context(), s, fmt.Sprintf("w%d", g), func(kind, id string) {
				mu.Lock()
				defer mu.Unlock()
				acked[id] = kind
				if writes++; writes == 300 {
					close(reached)
				}
			})
		}()
	}
	<-reached
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for g, err := range errs {
		if sandbox.CodeOf(err) != sandbox.FailedPrecondition {
			t.Errorf("writer %d ended with %v, want FailedPrecondition (closed)", g, err)
		}
	}
	s2 := open(t, path)
	defer s2.Close()
	lost := checkAcked(t, s2, acked)
	t.Logf("closed after 300 acknowledged writes (%d in all): %d lost", writes, lost)
}

// TestReadsShareOneConnection: with a single reading connection, 16
// goroutines reading at once (ReadEvents in a transaction, LastSeq,
// GetRun, LogSize) all finish: preparing a statement never waits for a
// connection while another read holds it and waits for the cache.
func TestReadsShareOneConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // a hang guard
	defer cancel()
	s, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "corral.db"), sqlitestore.Options{MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateRun(ctx, store.Run{ID: "r", ThreadID: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvents(ctx, "r", 0, 1, []store.NewEvent{{Type: "a"}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for g := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				_, err := s.ReadEvents(ctx, "r", 0, 0)
				if err == nil {
					_, err = s.LastSeq(ctx, "r")
				}
				if err == nil {
					_, _, err = s.GetRun(ctx, "r")
				}
				if err == nil {
					_, err = s.LogSize(ctx, "r")
				}
				if err != nil {
					errs[g] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			t.Errorf("reader %d: %v", g, err)
		}
	}
	t.Logf("16 readers × 50 rounds of 4 reads on one connection: %d failed", len(errs)-countNil(errs))
}

func countNil(errs []error) int {
	n := 0
	for _, err := range errs {
		if err == nil {
			n++
		}
	}
	return n
}
