package e2b_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/e2b"
	"github.com/d10ffeed/corral/provider/e2b/e2bfake"
	fspb "github.com/d10ffeed/corral/provider/e2b/internal/envd/filesystem"
	ppb "github.com/d10ffeed/corral/provider/e2b/internal/envd/process"
	"github.com/d10ffeed/corral/sandbox"
)

// sdkDist returns the installed e2b SDK's dist/index.mjs (scripts/setup-agents.sh
// installs it under $CORRAL_AGENTS_DIR, default /opt/corral-agents), or
// skips (fails under CI=true).
func sdkDist(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CORRAL_AGENTS_DIR")
	if dir == "" {
		dir = "/opt/corral-agents"
	}
	p := filepath.Join(dir, "node_modules", "e2b", "dist", "index.mjs")
	if _, err := os.Stat(p); err != nil {
		testutil.Unavailable(t, "the e2b SDK is not installed in "+dir+" (run scripts/setup-agents.sh)")
	}
	return p
}

// TestSDKDescriptors checks that the protos the Go code is generated from
// are the ones the official SDK speaks: every serialized file descriptor
// the SDK embeds for process and filesystem equals ours (json names and
// the well-known import, which protobuf-es leaves out, set aside).
func TestSDKDescriptors(t *testing.T) {
	src, err := os.ReadFile(sdkDist(t))
	if err != nil {
		t.Fatal(err)
	}
	ours := map[string]*descriptorpb.FileDescriptorProto{
		"process/process.proto":       protodesc.ToFileDescriptorProto(ppb.File_process_process_proto),
		"filesystem/filesystem.proto": protodesc.ToFileDescriptorProto(fspb.File_filesystem_filesystem_proto),
	}
	norm := func(fd *descriptorpb.FileDescriptorProto) {
		fd.SourceCodeInfo, fd.Options, fd.Dependency = nil, nil, nil
		var clear func(m *descriptorpb.DescriptorProto)
		clear = func(m *descriptorpb.DescriptorProto) {
			for _, f := range m.Field {
				f.JsonName = nil
			}
			for _, n := range m.NestedType {
				clear(n)
			}
		}
		for _, m := range fd.MessageType {
			clear(m)
		}
	}
	matched := 0
	for _, m := range regexp.MustCompile(`fileDesc\("([A-Za-z0-9+/=]+)"`).FindAllSubmatch(src, -1) {
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(string(m[1]), "="))
		if err != nil {
			t.Fatal(err)
		}
		var sdk descriptorpb.FileDescriptorProto
		if err := proto.Unmarshal(raw, &sdk); err != nil {
			t.Fatal(err)
		}
		o, ok := ours[sdk.GetName()]
		if !ok {
			continue
		}
		o = proto.Clone(o).(*descriptorpb.FileDescriptorProto)
		norm(o)
		norm(&sdk)
		if !proto.Equal(o, &sdk) {
			t.Errorf("%s: the SDK's descriptor differs from provider/e2b/internal/envd's proto", sdk.GetName())
		}
		matched++
	}
	t.Logf("%d of %d envd descriptors embedded in the SDK equal the generated code's", matched, len(ours))
	if matched != len(ours) {
		t.Fatalf("found %d of the SDK's envd descriptors, want %d", matched, len(ours))
	}
}

func node(t *testing.T) string {
	t.Helper()
	n, err := exec.LookPath("node")
	if err != nil {
		testutil.Unavailable(t, "node is not installed")
	}
	return n
}

// runSDK runs testdata/sdkcheck.mjs against the fake.
func runSDK(t *testing.T, f *e2bfake.Fake, extra ...string) string {
	t.Helper()
	dist := sdkDist(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node(t), "testdata/sdkcheck.mjs", dist)
	cmd.Env = append(os.Environ(), "E2B_API_KEY="+testKey, "E2B_API_URL="+f.URL(), "E2B_SANDBOX_URL="+f.URL())
	cmd.Env = append(cmd.Env, extra...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("sdkcheck: %v\n%s", err, out.String())
	}
	return out.String()
}

// TestOfficialSDK runs the official e2b SDK against the fake: create,
// getInfo, a command's output and exit code, a streamed background
// command, stdin, files (write, read, list, exists, makeDir), list and
// kill a background command, snapshot → list the sandbox's snapshots →
// create from it → delete, fork (the fork has the files), update the
// network, set timeout, pause → connect, list by metadata, kill.
func TestOfficialSDK(t *testing.T) {
	f := newFake(t)
	out := runSDK(t, f)
	t.Logf("SDK against the fake:\n%s", out)
	if !strings.Contains(out, "sdkcheck: ok") {
		t.Fatalf("sdkcheck did not finish:\n%s", out)
	}
	if n := len(f.Sandboxes("", nil)); n != 0 {
		t.Errorf("%d sandboxes left after the SDK's kill", n)
	}
}

// TestRequestCounts counts the fake's requests for one create, exec,
// write and read, by corral and by the official SDK.
func TestRequestCounts(t *testing.T) {
	ctx := testutil.HangGuard(t)
	f := newFake(t)
	p, _ := newProvider(t, f, e2b.Options{})
	type cost struct {
		req     int
		in, out int64
	}
	ours := map[string]cost{}
	count := func(name string, fn func()) {
		before := f.Total()
		in, out := f.Bytes()
		fn()
		in2, out2 := f.Bytes()
		ours[name] = cost{f.Total() - before, in2 - in, out2 - out}
	}
	var h sandbox.Handle
	count("create", func() { h = create(t, ctx, p, sandbox.CreateOptions{}) })
	count("exec", func() {
		if _, err := h.Exec(ctx, sandbox.Command{Shell: "echo hi"}); err != nil {
			t.Fatal(err)
		}
	})
	count("write", func() {
		if err := h.FS().WriteFile(ctx, "bench.txt", bytes.Repeat([]byte("x"), 1024)); err != nil {
			t.Fatal(err)
		}
	})
	count("read", func() {
		if _, err := h.FS().ReadFile(ctx, "bench.txt"); err != nil {
			t.Fatal(err)
		}
	})
	_ = h.Destroy(ctx)

	f2 := newFake(t)
	runSDK(t, f2, "SDKCHECK_ONLY=1")
	marks := f2.Marks()
	sdk := map[string]cost{}
	var prev e2bfake.Mark
	for i, m := range marks {
		name := "create"
		if i > 0 {
			name = marks[i-1].Name
		}
		sdk[name] = cost{m.Requests - prev.Requests, m.BytesIn - prev.BytesIn, m.BytesOut - prev.BytesOut}
		prev = m
	}
	for _, op := range []string{"create", "exec", "write", "read"} {
		o, s := ours[op], sdk[op]
		t.Logf("%-6s corral %d requests (%d B up, %d B down), official SDK %d requests (%d B up, %d B down)", op, o.req, o.in, o.out, s.req, s.in, s.out)
	}
	for _, op := range []string{"exec", "read"} {
		if ours[op].req > sdk[op].req {
			t.Errorf("%s: corral needs %d requests, the SDK %d", op, ours[op].req, sdk[op].req)
		}
	}
}
