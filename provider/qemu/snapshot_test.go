package qemu_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/qemu"
	"github.com/d10ffeed/corral/sandbox"
)

// shOut runs script in h and returns its trimmed stdout.
func shOut(t testing.TB, ctx context.Context, h sandbox.Handle, script string) string {
	t.Helper()
	res, err := h.Exec(ctx, sandbox.Command{Shell: script})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d: %s", script, res.ExitCode, res.Stderr)
	}
	return strings.TrimSpace(string(res.Stdout))
}

// waitFile waits for name to exist in h.
func waitFile(t testing.TB, ctx context.Context, h sandbox.Handle, name string) {
	t.Helper()
	testutil.WaitFor(t, ctx, name+" in "+h.ID(), 100*time.Millisecond, func(ctx context.Context) (bool, error) {
		return h.FS().Exists(ctx, name)
	})
}

// vmGone waits for the QEMU of sandbox id to have ended.
func vmGone(t testing.TB, ctx context.Context, p *qemu.Provider, id string) {
	t.Helper()
	testutil.WaitFor(t, ctx, "the end of "+id+"'s QEMU", 20*time.Millisecond, func(context.Context) (bool, error) {
		return qemu.PID(p, id) == 0, nil
	})
}

// TestSnapshotRunningProcess snapshots a VM while a process in it is
// mid-run; the process completes in the restored VM and in a fork, whose
// state then diverges from the restore's.
func TestSnapshotRunningProcess(t *testing.T) {
	p := newProvider(t, qemu.Options{})
	ctx := context.Background()
	h := testutil.Create(t, p, sandbox.CreateOptions{})
	// A process that needs the VM's memory to go on: its counter lives
	// only in the shell's memory until it writes the final line.
	proc, err := h.Spawn(ctx, sandbox.Command{Shell: `i=0; touch started; while [ $i -lt 30 ]; do i=$((i+1)); sleep 0.1; done; echo "counted $i in $$" > done`})
	if err != nil {
		t.Fatal(err)
	}
	waitFile(t, ctx, h, "started")
	pid := proc.PID()
	t0 := time.Now()
	snap, err := h.Snapshot(ctx, "mid-run")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot %v", time.Since(t0))
	t.Cleanup(func() { _ = p.DeleteSnapshot(context.Background(), snap.ID) })
	if ok, _ := h.FS().Exists(ctx, "done"); ok {
		t.Skip("the process finished before the snapshot (a very slow host); nothing to check")
	}
	t1 := time.Now()
	r, err := p.RestoreSnapshot(ctx, snap.ID, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restore %v", time.Since(t1))
	t.Cleanup(func() { _ = r.Destroy(context.Background()) })
	if got := shOut(t, ctx, r, fmt.Sprintf("kill -0 %d && echo alive", pid)); got != "alive" {
		t.Fatalf("the process %d is not alive in the restore: %q", pid, got)
	}
	waitFile(t, ctx, r, "done")
	want := fmt.Sprintf("counted 30 in %d", pid)
	if got := shOut(t, ctx, r, "cat done"); got != want {
		t.Fatalf("restore: done says %q, want %q", got, want)
	}
	// The source ran on too.
	if _, err := proc.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// Forks diverge: each writes its own file; neither sees the other's.
	f, err := r.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Destroy(context.Background()) })
	shOut(t, ctx, f, "echo fork > who; head -c 8 /dev/urandom | od -An -tx1 > rnd")
	shOut(t, ctx, r, "echo restore > who; head -c 8 /dev/urandom | od -An -tx1 > rnd")
	if a, b := shOut(t, ctx, f, "cat who"), shOut(t, ctx, r, "cat who"); a != "fork" || b != "restore" {
		t.Fatalf("fork sees %q, restore sees %q", a, b)
	}
	if a, b := shOut(t, ctx, f, "cat rnd"), shOut(t, ctx, r, "cat rnd"); a == b {
		t.Fatalf("fork and restore drew the same random bytes %q", a)
	}
}

// TestDestroyDeadVM destroys a VM whose QEMU was killed.
func TestDestroyDeadVM(t *testing.T) {
	p := newProvider(t, qemu.Options{})
	ctx := context.Background()
	h, err := p.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pid := qemu.PID(p, h.ID())
	if pid == 0 {
		t.Fatal("no QEMU pid")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	vmGone(t, ctx, p, h.ID())
	if err := p.Destroy(ctx, h.ID()); err != nil {
		t.Fatalf("Destroy of a dead VM: %v", err)
	}
	if _, err := p.Resume(ctx, h.ID()); sandbox.CodeOf(err) != sandbox.NotFound {
		t.Fatalf("Resume after Destroy: %v, want NotFound", err)
	}
}

// TestResumeDeadVMBootsDisks: Resume of a VM whose QEMU ended boots it
// again from its disks; files are kept.
func TestResumeDeadVMBootsDisks(t *testing.T) {
	p := newProvider(t, qemu.Options{})
	ctx := context.Background()
	h := testutil.Create(t, p, sandbox.CreateOptions{})
	shOut(t, ctx, h, "echo kept > f; sync")
	_ = syscall.Kill(qemu.PID(p, h.ID()), syscall.SIGKILL)
	vmGone(t, ctx, p, h.ID())
	r, err := p.Resume(ctx, h.ID())
	if err != nil {
		t.Fatal(err)
	}
	if got := shOut(t, ctx, r, "cat f"); got != "kept" {
		t.Fatalf("after reboot f = %q", got)
	}
}

// childEnv makes the test binary a child that creates a VM, prints its id
// and exits without destroying it.
const childEnv = "CORRAL_QEMU_TEST_CHILD"

func childMain() {
	p, err := qemu.New(qemu.Options{Agent: os.Getenv(childEnv)})
	if err == nil {
		var h sandbox.Handle
		if h, err = p.Create(context.Background(), sandbox.CreateOptions{}); err == nil {
			_, err = h.Exec(context.Background(), sandbox.Command{Shell: "echo from-child > mark; sleep 600 >/dev/null 2>&1 & echo $! > pid"})
			fmt.Println("ID", h.ID())
			if os.Getenv(childEnv+"_HOLD") != "" {
				// Keep the agent connection until the parent closes stdin.
				_, _ = io.Copy(io.Discard, os.Stdin)
				_, err = h.Exec(context.Background(), sandbox.Command{Shell: "true"})
			}
		}
	}
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// TestResumeAcrossProcesses: a VM made by another process (which then
// exited) is resumed by id here, with its files and processes.
func TestResumeAcrossProcesses(t *testing.T) {
	p := newProvider(t, qemu.Options{})
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), childEnv+"="+agentPath())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	var id string
	for _, l := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(l, "ID "); ok {
			id = s
		}
	}
	if id == "" {
		t.Fatalf("child printed no id: %s", out)
	}
	ctx := context.Background()
	h, err := p.Resume(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	if got := shOut(t, ctx, h, "cat mark; kill -0 $(cat pid) && echo running"); got != "from-child\nrunning" {
		t.Fatalf("resumed VM: %q", got)
	}
}

// TestConcurrentProcesses: while another process holds a VM's agent
// connection, this one resumes the VM and runs commands in it (through
// the VM's second agent port); the other goes on working.
func TestConcurrentProcesses(t *testing.T) {
	p := newProvider(t, qemu.Options{})
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), childEnv+"="+agentPath(), childEnv+"_HOLD=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	var id string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if s, ok := strings.CutPrefix(sc.Text(), "ID "); ok {
			id = s
			break
		}
	}
	if id == "" {
		t.Fatal("child printed no id")
	}
	ctx := context.Background()
	h, err := p.Resume(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(context.Background()) })
	if got := shOut(t, ctx, h, "cat mark"); got != "from-child" {
		t.Fatalf("resumed VM: %q", got)
	}
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the holding process failed after the takeover: %v", err)
	}
}
