package gateway_test

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/internal/fakemodel"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/docker"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/ensure"
)

// dockerBridge returns the host's docker0 address, or skips (fails under
// CI=true) without an engine, the bridge or the test image.
func dockerBridge(t *testing.T) (string, *docker.Provider) {
	t.Helper()
	ifc, err := net.InterfaceByName("docker0")
	if err != nil {
		testutil.Unavailable(t, "docker: no docker0 bridge: "+err.Error())
	}
	as, _ := ifc.Addrs()
	ip := ""
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			ip = n.IP.String()
		}
	}
	image := os.Getenv("CORRAL_DOCKER_TEST_IMAGE")
	if image == "" {
		image = "corral-test-base"
	}
	p, err := docker.New(docker.Options{Image: image, Labels: map[string]string{"dev.corral.test": "gateway"}})
	if err != nil {
		testutil.Unavailable(t, "docker: "+err.Error())
	}
	t.Cleanup(func() { _ = p.Close() })
	ctx := ctxT(t)
	if err := p.Ping(ctx); err != nil {
		testutil.Unavailable(t, "docker: "+err.Error())
	}
	if err := p.CheckImage(ctx); err != nil {
		testutil.Unavailable(t, "docker: the test image is missing (scripts/docker-test-image.sh): "+err.Error())
	}
	if ip == "" {
		testutil.Unavailable(t, "docker: docker0 has no IPv4 address")
	}
	return ip, p
}

const dockerAgent = `set -u
echo "placeholder=$ANTHROPIC_API_KEY"
wget -q -O resp.json --header "x-api-key: $ANTHROPIC_API_KEY" --header 'content-type: application/json' \
  --post-data '{"model":"fake-model","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}' "$ANTHROPIC_BASE_URL/v1/messages" && echo status=ok
cat resp.json; echo
sleep 30 & child=$!
/workspace/.memscan $SCAN_ARGS
kill $child
`

// TestBrokeredSecretDocker is the canary test on Docker: the container
// reaches the gateway on the docker0 bridge and authenticates at the fake
// model with its placeholder; no process in the container, no byte of the
// container's export or inspect, no event and no byte of the store holds
// the value.
func TestBrokeredSecretDocker(t *testing.T) {
	ip, p := dockerBridge(t)
	key := canary()
	model := fakemodel.New(t, fakemodel.Script{APIKey: key, Turns: []fakemodel.Turn{{Text: "hello from docker"}}})
	secrets, _ := sandbox.NewSecrets(map[string]string{"ANTHROPIC_API_KEY": key})
	secrets, err := secrets.WithBrokers(map[string]sandbox.Broker{"ANTHROPIC_API_KEY": {Hosts: []string{model.URL}, Header: "x-api-key"}})
	if err != nil {
		t.Fatal(err)
	}
	def := &sandbox.Definition{ID: "dk", Provider: sandbox.Guard(p, sandbox.GuardOptions{}), Workspace: &sandbox.Workspace{Secrets: secrets}}
	k := newKit(t, def, map[string]string{"docker": ip + ":0"})
	ctx := ctxT(t)
	// Make the thread's sandbox first and put memscan in it.
	req := ensure.Request{Thread: "th-docker", Run: "prep"}
	res, err := k.r.Ensure().Ensure(ctx, def, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.r.Ensure().Destroy(ctxT(t), def, req) })
	bin, err := os.ReadFile(buildMemscan(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Handle.FS().WriteFile(ctx, ".memscan", bin); err != nil {
		t.Fatal(err)
	}
	if r, err := res.Handle.Exec(ctx, sandbox.Command{Args: []string{"chmod", "755", "/workspace/.memscan"}}); err != nil || r.ExitCode != 0 {
		t.Fatalf("chmod: %v %+v", err, r)
	}
	_, text := k.complete(t, run.StartRequest{Definition: "dk", Thread: "th-docker", Harness: command.Name, Args: []string{"sh", "-c", dockerAgent},
		Env: map[string]string{"SCAN_ARGS": strings.Join(memscanArgs(key), " ")}})
	if !strings.Contains(text, "status=ok") || !strings.Contains(text, "hello from docker") || model.Unauthorized() != 0 {
		t.Fatalf("the container did not get the answer through the gateway (%d refused for the key):\n%s", model.Unauthorized(), text)
	}
	m := regexp.MustCompile(`scanned (\d+) processes, (\d+) bytes, (\d+) found`).FindStringSubmatch(text)
	if m == nil || m[1] == "0" || m[3] != "0" {
		t.Fatalf("memory scan: %q\n%s", m, text)
	}
	t.Logf("docker: memscan read every process of the container (%s, %s bytes): the value found 0 times", m[1], m[2])
	id, _ := docker.ContainerID(res.Handle)
	for _, args := range [][]string{{"export", id}, {"inspect", id}} {
		out, err := exec.CommandContext(ctx, "docker", args...).Output()
		if err != nil || len(out) < 100 {
			t.Fatalf("docker %s: %v (%d bytes)", args[0], err, len(out))
		}
		if bytes.Contains(out, []byte(key)) {
			t.Errorf("docker %s holds the value", args[0])
		}
	}
	for _, dir := range []string{k.dbPath, k.dbPath + "-wal"} {
		if hit := grepTree(t, dir, key); hit != "" {
			t.Errorf("the value is in %s", hit)
		}
	}
}
