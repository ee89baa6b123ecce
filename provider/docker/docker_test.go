package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/docker"
	"github.com/d10ffeed/corral/sandbox"
)

func sh(t testing.TB, h sandbox.Handle, script string) string {
	t.Helper()
	res, err := h.Exec(context.Background(), sandbox.Command{Shell: script})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d, stderr %q", script, res.ExitCode, res.Stderr)
	}
	return string(res.Stdout)
}

func wantCode(t testing.TB, what string, err error, code sandbox.Code) {
	t.Helper()
	if got := sandbox.CodeOf(err); got != code {
		t.Errorf("%s: got code %v (err %v), want %v", what, got, err, code)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TestSecretCanary proves that the environment given at create reaches
// commands but none of: the container's and the fork's configuration, the
// snapshot image's configuration, the file systems of the fork and of a
// container made from the snapshot, and any process's argv.
func TestSecretCanary(t *testing.T) {
	p := newProvider(t, docker.Options{})
	api := apiClient(t)
	ctx := context.Background()
	canary := "corral-canary-" + randomHex(16)
	h := testutil.Create(t, p, sandbox.CreateOptions{Env: map[string]string{"CORRAL_CANARY": canary}})

	if got := sh(t, h, `printf %s "$CORRAL_CANARY"`); got != canary {
		t.Fatalf("the command did not see the canary: %q", got)
	}
	if got := sh(t, h, `test "$CORRAL_CANARY" = "$(printf %s "$CORRAL_CANARY")" && echo used`); got != "used\n" {
		t.Fatalf("canary check: %q", got)
	}

	// A process runs with the canary in its environment: it is in its
	// environ (which shows the check below can see it), never in any argv.
	pr, err := h.Spawn(ctx, sandbox.Command{Args: []string{"sleep", "30"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pr.Kill(context.Background(), syscall.SIGKILL) })
	environ := sh(t, h, fmt.Sprintf(`tr '\0' '\n' < /proc/%d/environ`, pr.PID()))
	if !strings.Contains(environ, canary) {
		t.Fatalf("the spawned sleep lacks the canary in its environment: %q", environ)
	}
	argv := sh(t, h, `for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f"; echo; done; ps -o args`)
	if !strings.Contains(argv, "sleep 30") {
		t.Fatalf("the argv listing does not show the spawned sleep: %q", argv)
	}
	if strings.Contains(argv, canary) {
		t.Errorf("the canary appears in a process's argv:\n%s", argv)
	}

	snap, err := h.Snapshot(ctx, "canary")
	if err != nil {
		t.Fatal(err)
	}
	f, err := h.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	testutil.DestroyAtEnd(t, f)
	if got := sh(t, f, `printf %s "$CORRAL_CANARY"`); got != canary {
		t.Errorf("the fork lost the sandbox environment: %q", got)
	}
	r, err := p.RestoreSnapshot(ctx, snap.ID, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.DestroyAtEnd(t, r)
	if got := sh(t, r, `printf %s "$CORRAL_CANARY"`); got != "" {
		t.Errorf("a sandbox restored without env sees the canary: %q", got)
	}

	for _, h := range []sandbox.Handle{h, f, r} {
		res, err := api.ContainerInspect(ctx, containerID(t, h), client.ContainerInspectOptions{Size: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Raw) < 1000 || bytes.Contains(res.Raw, []byte(canary)) {
			t.Errorf("container %s: the canary is in docker inspect (%d bytes)", h.ID(), len(res.Raw))
		}
	}
	var raw bytes.Buffer
	if _, err := api.ImageInspect(ctx, snap.ID, client.ImageInspectWithRawResponse(&raw)); err != nil {
		t.Fatal(err)
	}
	if raw.Len() < 500 || bytes.Contains(raw.Bytes(), []byte(canary)) {
		t.Errorf("the snapshot image's inspect holds the canary (%d bytes)", raw.Len())
	}
	hist, err := api.ImageHistory(ctx, snap.ID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(fmt.Sprintf("%+v", hist), canary) {
		t.Error("the snapshot image's history holds the canary")
	}
	// The whole file system of the fork and of the restored container.
	for _, h := range []sandbox.Handle{f, r} {
		exp, err := api.ContainerExport(ctx, containerID(t, h), client.ContainerExportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(exp)
		_ = exp.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(data) < 1<<20 || bytes.Contains(data, []byte(canary)) {
			t.Errorf("export of %s (%d bytes) holds the canary", h.ID(), len(data))
		}
	}
}

func TestNetworkPolicy(t *testing.T) {
	p := newProvider(t, docker.Options{Ports: []int{8080}})
	ctx := context.Background()
	deny := testutil.Create(t, p, sandbox.CreateOptions{Network: sandbox.NetworkDeny})
	if got := sh(t, deny, "ls /sys/class/net"); got != "lo\n" {
		t.Errorf("denied sandbox interfaces = %q, want only lo", got)
	}
	_, err := deny.ConnectPort(ctx, 8080)
	wantCode(t, "ConnectPort on a denied sandbox", err, sandbox.FailedPrecondition)
	f, err := deny.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	testutil.DestroyAtEnd(t, f)
	if got := sh(t, f, "ls /sys/class/net"); got != "lo\n" {
		t.Errorf("the fork of a denied sandbox has %q", got)
	}
	open := testutil.Create(t, p, sandbox.CreateOptions{})
	if got := sh(t, open, "ls /sys/class/net"); got != "eth0\nlo\n" {
		t.Errorf("default sandbox interfaces = %q, want eth0 and lo", got)
	}
	if got := sh(t, open, "grep host.docker.internal /etc/hosts | wc -l"); strings.TrimSpace(got) != "1" {
		t.Errorf("host.docker.internal is not in /etc/hosts: %q", got)
	}
}

// TestContainerConfig checks the security defaults, the labels and that
// ports are published on the loopback only.
func TestContainerConfig(t *testing.T) {
	p := newProvider(t, docker.Options{Ports: []int{8080, 9090}, Labels: map[string]string{"team": "a"}})
	api := apiClient(t)
	ctx := context.Background()
	h := testutil.Create(t, p, sandbox.CreateOptions{ID: "config-" + randomHex(4), Labels: map[string]string{"purpose": "test"}})
	res, err := api.ContainerInspect(ctx, h.ID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Container
	hc := c.HostConfig
	if !slices.Contains(hc.SecurityOpt, "no-new-privileges") {
		t.Errorf("SecurityOpt = %v, want no-new-privileges", hc.SecurityOpt)
	}
	if hc.PidsLimit == nil || *hc.PidsLimit != 1024 {
		t.Errorf("PidsLimit = %v, want 1024", hc.PidsLimit)
	}
	if hc.Init == nil || !*hc.Init {
		t.Error("Init is not set: PID 1 would not reap zombies")
	}
	if len(hc.Binds) != 0 || len(c.Mounts) != 0 || hc.Privileged {
		t.Errorf("host mounts or privileges: binds %v mounts %v privileged %v", hc.Binds, c.Mounts, hc.Privileged)
	}
	if c.Config.Env == nil || slices.ContainsFunc(c.Config.Env, func(e string) bool { return !strings.HasPrefix(e, "PATH=") }) {
		t.Errorf("Config.Env = %v, want the image's PATH only", c.Config.Env)
	}
	for k, want := range map[string]string{
		docker.LabelManaged: "true", docker.LabelSandboxID: h.ID(), docker.LabelKey: h.ID(),
		"team": "a", "purpose": "test", runLabel: runID,
	} {
		if got := c.Config.Labels[k]; got != want {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, c.Config.Labels[docker.LabelCreatedAt]); err != nil {
		t.Errorf("created-at label: %v", err)
	}
	for port, bindings := range hc.PortBindings {
		for _, b := range bindings {
			if b.HostIP.String() != "127.0.0.1" {
				t.Errorf("port %v is published on %v, want 127.0.0.1 only", port, b.HostIP)
			}
		}
	}
	ep, err := h.ConnectPort(ctx, 9090)
	if err != nil || !strings.HasPrefix(ep.URL, "http://127.0.0.1:") {
		t.Errorf("ConnectPort(9090) = %+v, %v", ep, err)
	}
	_, err = h.ConnectPort(ctx, 7070)
	wantCode(t, "ConnectPort of an unpublished port", err, sandbox.FailedPrecondition)
	// PID 1 is the init that reaps orphans.
	if got := sh(t, h, "cat /proc/1/comm"); got != "docker-init\n" {
		t.Errorf("PID 1 is %q", got)
	}
	// The environment is an overlay: the image's PATH survives, and corral
	// adds no HOME of its own.
	if got := sh(t, h, `printf '%s|%s' "$PATH" "${HOME-unset}"`); !strings.HasPrefix(got, "/usr/sbin:/usr/bin:/sbin:/bin|") {
		t.Errorf("PATH|HOME = %q", got)
	}

	noPorts := newProvider(t, docker.Options{})
	if noPorts.Capabilities().Ports {
		t.Error("a provider that publishes no port claims the ports capability")
	}
}

// TestNamesAndResume covers naming from CreateOptions.ID, Resume by every
// kind of id, AlreadyExists, a stopped container and one removed behind
// corral's back.
func TestNamesAndResume(t *testing.T) {
	p := newProvider(t, docker.Options{})
	api := apiClient(t)
	ctx := context.Background()

	key := "thread:42/run " + randomHex(4) // not a valid container name
	h := testutil.Create(t, p, sandbox.CreateOptions{ID: key, Env: map[string]string{"A": "1"}})
	if h.ID() == key || !strings.HasPrefix(h.ID(), "corral-thread-42-run-") {
		t.Errorf("id for key %q = %q, want a digest-derived name", key, h.ID())
	}
	cid := containerID(t, h)
	if err := h.FS().WriteFile(ctx, "kept.txt", []byte("kept")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{h.ID(), cid, cid[:12], key} {
		r, err := p.Resume(ctx, id)
		if err != nil {
			t.Errorf("Resume(%q): %v", id, err)
			continue
		}
		if r.ID() != h.ID() {
			t.Errorf("Resume(%q).ID() = %q, want %q", id, r.ID(), h.ID())
		}
	}
	_, err := p.Create(ctx, sandbox.CreateOptions{ID: key})
	wantCode(t, "Create with the id of an existing sandbox", err, sandbox.AlreadyExists)

	valid := "corral-test-" + randomHex(4)
	v := testutil.Create(t, p, sandbox.CreateOptions{ID: valid})
	if v.ID() != valid {
		t.Errorf("a valid name is used as is: got %q, want %q", v.ID(), valid)
	}

	// Stopped behind corral's back: exec fails clearly, Resume starts it,
	// the files are still there, and SetEnv brings the environment back.
	timeout := 0
	if _, err := api.ContainerStop(ctx, cid, client.ContainerStopOptions{Timeout: &timeout}); err != nil {
		t.Fatal(err)
	}
	_, err = h.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	wantCode(t, "Exec in a stopped container", err, sandbox.FailedPrecondition)
	r, err := p.Resume(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := r.FS().ReadFile(ctx, "kept.txt"); err != nil || string(b) != "kept" {
		t.Errorf("file after stop and resume: %q %v", b, err)
	}
	if got := sh(t, r, `printf %s "${A-unset}"`); got != "unset" {
		t.Errorf("the environment survived a resume: %q (it must be re-applied)", got)
	}
	if err := r.SetEnv(ctx, map[string]string{"A": "2"}); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, r, `printf %s "$A"`); got != "2" {
		t.Errorf("after SetEnv: %q", got)
	}

	// Removed behind corral's back.
	if _, err := api.ContainerRemove(ctx, cid, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	_, err = p.Resume(ctx, h.ID())
	wantCode(t, "Resume of a removed container", err, sandbox.NotFound)
	_, err = p.Resume(ctx, key)
	wantCode(t, "Resume by key of a removed container", err, sandbox.NotFound)
	_, err = h.Exec(ctx, sandbox.Command{Args: []string{"true"}})
	wantCode(t, "Exec in a removed container", err, sandbox.NotFound)
	_, err = h.FS().ReadFile(ctx, "kept.txt")
	wantCode(t, "ReadFile in a removed container", err, sandbox.NotFound)
	_, err = h.Spawn(ctx, sandbox.Command{Args: []string{"true"}})
	wantCode(t, "Spawn in a removed container", err, sandbox.NotFound)
	if err := p.Destroy(ctx, key); err != nil {
		t.Errorf("Destroy of a removed sandbox: %v", err)
	}

	// A container corral did not make is neither resumed nor destroyed.
	foreign, err := api.ContainerCreate(ctx, client.ContainerCreateOptions{Image: testImage, Name: "foreign-" + randomHex(4)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = api.ContainerRemove(context.Background(), foreign.ID, client.ContainerRemoveOptions{Force: true})
	})
	_, err = p.Resume(ctx, foreign.ID)
	wantCode(t, "Resume of a foreign container", err, sandbox.NotFound)
	wantCode(t, "Destroy of a foreign container", p.Destroy(ctx, foreign.ID), sandbox.NotFound)
	if _, err := api.ContainerInspect(ctx, foreign.ID, client.ContainerInspectOptions{}); err != nil {
		t.Errorf("the foreign container is gone: %v", err)
	}
}

func TestClearErrors(t *testing.T) {
	requireDocker(t)
	ctx := context.Background()
	p, err := docker.New(docker.Options{Image: "corral-no-such-image:" + randomHex(4), Pull: docker.PullNever})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, err = p.Create(ctx, sandbox.CreateOptions{})
	wantCode(t, "Create with a missing image", err, sandbox.NotFound)
	if err == nil || !strings.Contains(err.Error(), "docker build") || !strings.Contains(err.Error(), "docker load") || !strings.Contains(err.Error(), "pull policy is never") {
		t.Errorf("missing-image message: %v", err)
	}
	wantCode(t, "CheckImage", p.CheckImage(ctx), sandbox.NotFound)

	sock := filepath.Join(t.TempDir(), "no-engine.sock")
	q, err := docker.New(docker.Options{Image: testImage, Host: "unix://" + sock})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	_, err = q.Create(ctx, sandbox.CreateOptions{})
	wantCode(t, "Create with no engine", err, sandbox.Unavailable)
	if err == nil || !strings.Contains(err.Error(), sock) {
		t.Errorf("unreachable-engine message does not name the socket: %v", err)
	}
	wantCode(t, "Ping with no engine", q.Ping(ctx), sandbox.Unavailable)

	noImage, err := docker.New(docker.Options{})
	if err != nil {
		t.Fatalf("New without an image (for management only): %v", err)
	}
	_, err = noImage.Create(ctx, sandbox.CreateOptions{})
	wantCode(t, "Create without an image", err, sandbox.InvalidArgument)
	noImage.Close()
	_, err = docker.New(docker.Options{Image: "x", Ports: []int{0}})
	wantCode(t, "New with a bad port", err, sandbox.InvalidArgument)
	_, err = docker.New(docker.Options{Image: "x", Workdir: "rel"})
	wantCode(t, "New with a relative workdir", err, sandbox.InvalidArgument)
}

// heartbeat's real work is a backgrounded grandchild appending to a file
// every 50 ms.
const heartbeat = `( while [ ! -e hb.stop ]; do echo . >> hb; sleep 0.05; done ) & wait`

// stopsBeating waits for the heartbeat to start, runs kill, and fails the
// test unless every heartbeat process is gone and the heartbeat is still.
// A synchronous kill (Process.Kill returns once the group is gone) must
// leave nothing at once; a kill in the background (a cancelled context)
// gets up to 30 s, a hang guard for a loaded machine, not a deadline.
func stopsBeating(t *testing.T, h sandbox.Handle, synchronous bool, kill func()) {
	t.Helper()
	ctx := context.Background()
	size := func() int64 {
		fi, err := h.FS().Stat(ctx, "hb")
		if err != nil {
			return 0
		}
		return fi.Size
	}
	deadline := time.Now().Add(30 * time.Second)
	for size() < 4 {
		if time.Now().After(deadline) {
			t.Fatal("the heartbeat never started")
		}
		time.Sleep(50 * time.Millisecond)
	}
	start := time.Now()
	kill()
	left := func() string { return sh(t, h, "ps -o args | grep -e '[s]leep 0[.]05' -e 'hb[.]stop' || true") }
	got := left()
	for !synchronous && got != "" && time.Since(start) < 30*time.Second {
		time.Sleep(100 * time.Millisecond)
		got = left()
	}
	if got != "" {
		t.Fatalf("heartbeat processes remain %v after the kill (synchronous %v):\n%s", time.Since(start).Round(time.Millisecond), synchronous, got)
	}
	t.Logf("no heartbeat process left %v after the kill began (synchronous %v)", time.Since(start).Round(time.Millisecond), synchronous)
	// Nothing is left to write: the heartbeat is still.
	a := size()
	time.Sleep(500 * time.Millisecond)
	if b := size(); a != b {
		t.Fatalf("the heartbeat kept going after the kill: %d -> %d bytes", a, b)
	}
}

func TestKill(t *testing.T) {
	p := newProvider(t, docker.Options{KillGrace: 500 * time.Millisecond})
	h := testutil.Create(t, p, sandbox.CreateOptions{})
	ctx := context.Background()

	t.Run("Kill", func(t *testing.T) {
		_ = h.FS().RemoveAll(ctx, "hb")
		pr, err := h.Spawn(ctx, sandbox.Command{Shell: heartbeat})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = io.Copy(io.Discard, pr.Stdout()) }()
		stopsBeating(t, h, true, func() {
			// Concurrent kills share one.
			var wg sync.WaitGroup
			errs := make([]error, 3)
			for i := range errs {
				wg.Go(func() { errs[i] = pr.Kill(ctx, 0) })
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Errorf("Kill: %v", err)
				}
			}
		})
		code, err := pr.Wait(ctx)
		if err != nil || code != 128+int(syscall.SIGTERM) {
			t.Errorf("Wait after SIGTERM = %d, %v; want %d", code, err, 128+int(syscall.SIGTERM))
		}
		// A no-op: TestDaemonCalls proves it makes no engine call.
		if err := pr.Kill(ctx, 0); err != nil {
			t.Errorf("Kill after exit: %v", err)
		}
	})
	t.Run("Context", func(t *testing.T) {
		_ = h.FS().RemoveAll(ctx, "hb")
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		pr, err := h.Spawn(sctx, sandbox.Command{Shell: heartbeat})
		if err != nil {
			t.Fatal(err)
		}
		stopsBeating(t, h, false, cancel)
		if _, err := pr.Wait(ctx); err != nil {
			t.Errorf("Wait: %v", err)
		}
	})
	t.Run("EscalatesToKILL", func(t *testing.T) {
		pr, err := h.Spawn(ctx, sandbox.Command{Shell: `trap '' TERM; echo ready; while :; do sleep 0.1; done`})
		if err != nil {
			t.Fatal(err)
		}
		line := make([]byte, 6)
		if _, err := io.ReadFull(pr.Stdout(), line); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := pr.Kill(ctx, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 500*time.Millisecond {
			t.Errorf("Kill returned after %v, before the grace period ended", d)
		}
		if code, err := pr.Wait(ctx); err != nil || code != 128+int(syscall.SIGKILL) {
			t.Errorf("Wait = %d, %v; want %d", code, err, 128+int(syscall.SIGKILL))
		}
	})
	t.Run("OtherSignal", func(t *testing.T) {
		pr, err := h.Spawn(ctx, sandbox.Command{Shell: `trap 'echo got-usr1; exit 3' USR1; echo ready; while :; do sleep 0.05; done`})
		if err != nil {
			t.Fatal(err)
		}
		r := make([]byte, 6)
		if _, err := io.ReadFull(pr.Stdout(), r); err != nil {
			t.Fatal(err)
		}
		if err := pr.Kill(ctx, syscall.SIGUSR1); err != nil {
			t.Fatal(err)
		}
		if code, err := pr.Wait(ctx); err != nil || code != 3 {
			t.Errorf("Wait after USR1 = %d, %v; want 3", code, err)
		}
	})
	t.Run("ExecDeadlineKills", func(t *testing.T) {
		marker := "98765" + strconv.Itoa(int(time.Now().UnixNano()%1000))
		_, err := h.Exec(ctx, sandbox.Command{Shell: "sleep " + marker + " & sleep " + marker + "1; wait", Timeout: 300 * time.Millisecond})
		wantCode(t, "Exec past its Timeout", err, sandbox.DeadlineExceeded)
		if got := sh(t, h, "ps -o args"); strings.Contains(got, "sleep "+marker) {
			t.Errorf("the command survived its deadline:\n%s", got)
		}
	})
	t.Run("PID", func(t *testing.T) {
		pr, err := h.Spawn(ctx, sandbox.Command{Shell: `echo $$`})
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(pr.Stdout())
		if strings.TrimSpace(string(out)) != strconv.Itoa(pr.PID()) {
			t.Errorf("PID() = %d, the process says %q", pr.PID(), out)
		}
		if code, err := pr.Wait(ctx); err != nil || code != 0 {
			t.Errorf("Wait = %d, %v", code, err)
		}
	})
	t.Run("LeavesNothing", func(t *testing.T) {
		// No pid files, no leftover processes from the cases above besides
		// the keep-alive.
		if got := sh(t, h, "ls -A /tmp"); got != "" {
			t.Errorf("/tmp holds %q", got)
		}
	})
}

func TestExecStdin(t *testing.T) {
	p := newProvider(t, docker.Options{})
	h := testutil.Create(t, p, sandbox.CreateOptions{})
	ctx := context.Background()
	data := make([]byte, 1<<20)
	_, _ = rand.Read(data)
	res, err := h.Exec(ctx, sandbox.Command{Args: []string{"cat"}, Stdin: bytes.NewReader(data)})
	if err != nil || res.ExitCode != 0 || !bytes.Equal(res.Stdout, data) {
		t.Fatalf("1 MiB through cat: %d bytes, exit %v, %v", len(res.Stdout), res.ExitCode, err)
	}
	// A command that exits without reading its stdin does not hang Exec.
	start := time.Now()
	res, err = h.Exec(ctx, sandbox.Command{Args: []string{"true"}, Stdin: bytes.NewReader(make([]byte, 8<<20))})
	if err != nil || res.ExitCode != 0 || time.Since(start) > 20*time.Second {
		t.Errorf("unread stdin: %+v %v after %v", res, err, time.Since(start))
	}
	// Output keeps streaming after stdin is closed.
	res, err = h.Exec(ctx, sandbox.Command{Shell: "wc -c; sleep 0.3; echo after-eof", Stdin: strings.NewReader("12345")})
	if err != nil || strings.Fields(string(res.Stdout))[0] != "5" || !strings.HasSuffix(string(res.Stdout), "after-eof\n") {
		t.Errorf("stdin then output: %q %v", res.Stdout, err)
	}
}

func TestSourceDir(t *testing.T) {
	p := newProvider(t, docker.Options{})
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "src", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "src", "deep", "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\necho ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("src/deep/main.go", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	h := testutil.Create(t, p, sandbox.CreateOptions{SourceDir: dir})
	ctx := context.Background()
	if b, err := h.FS().ReadFile(ctx, "link"); err != nil || string(b) != "package main\n" {
		t.Errorf("read through the copied link: %q %v", b, err)
	}
	if got := sh(t, h, "./run.sh"); got != "ran\n" {
		t.Errorf("the copied script (mode kept) printed %q", got)
	}
	_, err := p.Create(ctx, sandbox.CreateOptions{SourceDir: filepath.Join(dir, "missing")})
	if err == nil {
		t.Error("Create with a missing SourceDir succeeded")
	}
}

func TestSnapshotsAndPrune(t *testing.T) {
	p := newProvider(t, docker.Options{})
	api := apiClient(t)
	ctx := context.Background()
	h := testutil.Create(t, p, sandbox.CreateOptions{ID: "snap-" + randomHex(4)})
	if err := h.FS().WriteFile(ctx, "state.txt", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	snap, err := h.Snapshot(ctx, "after setup")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(snap.ID, docker.DefaultSnapshotRepository+":") || snap.SandboxID != h.ID() || snap.Label != "after setup" || snap.CreatedAt.Before(before.Add(-time.Second)) {
		t.Errorf("Snapshot = %+v", snap)
	}
	im, err := api.ImageInspect(ctx, snap.ID)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		docker.LabelManaged: "true", docker.LabelSnapshot: "snapshot", docker.LabelSnapshotOf: h.ID(),
		docker.LabelSnapshotLabel: "after setup", docker.LabelKey: "",
	} {
		if got := im.Config.Labels[k]; got != want {
			t.Errorf("image label %s = %q, want %q", k, got, want)
		}
	}
	if im.Config.WorkingDir != "/workspace" || len(im.Config.Env) != 1 {
		t.Errorf("the image config lost the container's: workdir %q env %v", im.Config.WorkingDir, im.Config.Env)
	}

	// A restored sandbox gets no key from the image.
	r, err := p.RestoreSnapshot(ctx, snap.ID, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.DestroyAtEnd(t, r)
	boxes, err := p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, b := range boxes {
		if b.ID == r.ID() {
			found = true
			if b.Key != "" || b.Labels[docker.LabelFrom] != snap.ID || b.State != "running" || b.Image != snap.ID {
				t.Errorf("List entry of the restored sandbox = %+v", b)
			}
		}
	}
	if !found {
		t.Errorf("List lacks %s", r.ID())
	}

	snaps, err := p.ListSnapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(snaps, func(s docker.SnapshotImage) bool {
		return s.ID == snap.ID && s.Kind == "snapshot" && s.SandboxID == h.ID() && s.Label == "after setup"
	}) {
		t.Errorf("ListSnapshots lacks %s: %+v", snap.ID, snaps)
	}

	// A fork's image goes with the fork.
	f, err := h.Fork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fb, _ := p.List(ctx)
	forkImage := ""
	for _, b := range fb {
		if b.ID == f.ID() {
			forkImage = b.Labels[docker.LabelFrom]
		}
	}
	if forkImage == "" {
		t.Fatal("the fork has no image label")
	}
	if err := f.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := api.ImageInspect(ctx, forkImage); err == nil {
		t.Errorf("the fork's image %s outlived the fork", forkImage)
	}

	// Prune by age and label: a dry run, a cutoff in the future of
	// everything, then the real thing (the snapshot in use by r is kept).
	sel := map[string]string{runLabel: runID, docker.LabelSnapshotOf: h.ID()}
	rep, err := p.Prune(ctx, docker.PruneOptions{Snapshots: true, Labels: sel, OlderThan: time.Hour})
	if err != nil || len(rep.Snapshots) != 0 {
		t.Errorf("Prune of nothing that old = %+v, %v", rep, err)
	}
	rep, err = p.Prune(ctx, docker.PruneOptions{Snapshots: true, Labels: sel, DryRun: true})
	if err != nil || !slices.Equal(rep.Snapshots, []string{snap.ID}) {
		t.Errorf("dry run = %+v, %v", rep, err)
	}
	if _, err := api.ImageInspect(ctx, snap.ID); err != nil {
		t.Errorf("the dry run removed the image: %v", err)
	}
	if err := r.Destroy(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err = p.Prune(ctx, docker.PruneOptions{Snapshots: true, Labels: sel})
	if err != nil || !slices.Equal(rep.Snapshots, []string{snap.ID}) {
		t.Errorf("Prune = %+v, %v", rep, err)
	}
	if _, err := api.ImageInspect(ctx, snap.ID); err == nil {
		t.Error("the pruned image is still there")
	}
	_, err = p.RestoreSnapshot(ctx, snap.ID, sandbox.CreateOptions{})
	wantCode(t, "RestoreSnapshot of a pruned snapshot", err, sandbox.NotFound)

	// Sandboxes: KeepRunning spares h; without it h goes.
	hs := map[string]string{runLabel: runID, docker.LabelSandboxID: h.ID()}
	rep, err = p.Prune(ctx, docker.PruneOptions{Sandboxes: true, Labels: hs, KeepRunning: true})
	if err != nil || len(rep.Sandboxes) != 0 {
		t.Errorf("Prune KeepRunning = %+v, %v", rep, err)
	}
	rep, err = p.Prune(ctx, docker.PruneOptions{Sandboxes: true, Labels: hs})
	if err != nil || !slices.Equal(rep.Sandboxes, []string{h.ID()}) {
		t.Errorf("Prune sandboxes = %+v, %v", rep, err)
	}
	_, err = p.Resume(ctx, h.ID())
	wantCode(t, "Resume of a pruned sandbox", err, sandbox.NotFound)
}

// TestConcurrentHandles runs file operations and commands from many
// goroutines on one handle.
func TestConcurrentHandles(t *testing.T) {
	p := newProvider(t, docker.Options{})
	h := testutil.Create(t, p, sandbox.CreateOptions{})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 8 {
		wg.Go(func() {
			name := fmt.Sprintf("dir%d/f.txt", i)
			if err := h.FS().WriteFile(ctx, name, []byte(name)); err != nil {
				errs <- err
				return
			}
			b, err := h.FS().ReadFile(ctx, name)
			if err != nil || string(b) != name {
				errs <- fmt.Errorf("%s: %q %v", name, b, err)
			}
			if err := h.SetEnv(ctx, map[string]string{fmt.Sprintf("V%d", i): "x"}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if errors.Is(nil, sandbox.NotFound) {
		t.Fatal("unreachable")
	}
}

// TestExportTar is a sanity check of the export used by the canary test:
// it is a tar of the container's files.
func TestExportTar(t *testing.T) {
	p := newProvider(t, docker.Options{})
	api := apiClient(t)
	h := testutil.Create(t, p, sandbox.CreateOptions{})
	if err := h.FS().WriteFile(context.Background(), "marker.txt", []byte("m")); err != nil {
		t.Fatal(err)
	}
	exp, err := api.ContainerExport(context.Background(), containerID(t, h), client.ContainerExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Close()
	tr := tar.NewReader(exp)
	for {
		hdr, err := tr.Next()
		if err != nil {
			t.Fatalf("workspace/marker.txt not in the export: %v", err)
		}
		if hdr.Name == "workspace/marker.txt" {
			return
		}
	}
}

// TestNonRootUser runs sandboxes as an unprivileged user: the workspace
// is theirs, and the kill still reaches their processes.
func TestNonRootUser(t *testing.T) {
	p := newProvider(t, docker.Options{User: "65534:65534", Workdir: "/home/work"})
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "copied.txt"), []byte("copied"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := testutil.Create(t, p, sandbox.CreateOptions{SourceDir: src})
	ctx := context.Background()
	if err := h.FS().WriteFile(ctx, "a/b.txt", []byte("mine")); err != nil {
		t.Fatal(err)
	}
	if err := h.FS().WriteFile(ctx, "copied.txt", []byte("changed")); err != nil {
		t.Errorf("the user cannot change a file copied from SourceDir: %v", err)
	}
	if got := sh(t, h, `id -u; pwd; stat -c %u a/b.txt . copied.txt`); got != "65534\n/home/work\n65534\n65534\n65534\n" {
		t.Errorf("uid, cwd, owners = %q", got)
	}
	if got := sh(t, h, `grep -c CapEff:.0000000000000000 /proc/self/status`); got != "1\n" {
		t.Errorf("commands of a non-root user have effective capabilities")
	}
	// Resume keeps running commands as the user.
	r, err := p.Resume(ctx, h.ID())
	if err != nil {
		t.Fatal(err)
	}
	if got := sh(t, r, "id -u"); got != "65534\n" {
		t.Errorf("after Resume commands run as %q", got)
	}
	pr, err := h.Spawn(ctx, sandbox.Command{Args: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pr.Kill(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if code, err := pr.Wait(ctx); err != nil || code != 143 {
		t.Errorf("Wait = %d, %v", code, err)
	}
}

func TestSpawnOptions(t *testing.T) {
	p := newProvider(t, docker.Options{})
	h := testutil.Create(t, p, sandbox.CreateOptions{})
	ctx := context.Background()
	_, err := h.Spawn(ctx, sandbox.Command{Args: []string{"cat"}, Stdin: strings.NewReader("x")})
	wantCode(t, "Spawn with Command.Stdin", err, sandbox.InvalidArgument)
	start := time.Now()
	pr, err := h.Spawn(ctx, sandbox.Command{Args: []string{"sleep", "60"}, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	code, err := pr.Wait(ctx)
	if err != nil || code != 143 || time.Since(start) > 20*time.Second {
		t.Errorf("a spawn past its Timeout: Wait = %d, %v after %v", code, err, time.Since(start))
	}
	_, err = h.Spawn(ctx, sandbox.Command{Args: []string{"true"}, Dir: "no/such/dir"})
	wantCode(t, "Spawn in a missing dir", err, sandbox.NotFound)
	if err := h.FS().WriteFile(ctx, "file", nil); err != nil {
		t.Fatal(err)
	}
	_, err = h.Exec(ctx, sandbox.Command{Args: []string{"true"}, Dir: "file"})
	wantCode(t, "Exec in a file", err, sandbox.InvalidArgument)
}
