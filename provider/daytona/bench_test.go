package daytona_test

import (
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/daytona"
	"github.com/d10ffeed/corral/provider/daytona/daytonafake"
	"github.com/d10ffeed/corral/sandbox"
)

// requests is every route's count on the fake.
func requests(s *daytonafake.Server) int {
	n := 0
	for _, r := range []string{"create", "list", "get", "delete", "start", "stop", "snapshot", "deleteSnapshot", "proxyURL",
		"preview", "signedPreview", "execute", "sessionCreate", "sessionGet", "sessionDelete", "sessionExec", "command",
		"logs", "input", "workDir", "homeDir", "filesList", "filesInfo", "filesDelete", "folder", "upload", "download"} {
		n += s.Count(r)
	}
	return n
}

// TestRequestCounts counts the fake's requests for corral's operations
// and logs them next to the official SDK's for the same operation (its
// script's create: 1 (POST /sandbox); executeCommand: 1; uploadFile: 1;
// downloadFile: 1). Create costs one request more when no Workdir is
// configured (GET /work-dir: the create answer does not carry the daemon's
// work dir). A file read or write costs the SDK's one request while no
// link can stand in the workspace, and one exec more (the link guard) once
// a command ran.
func TestRequestCounts(t *testing.T) {
	s := newFake(t)
	ctx := testutil.HangGuard(t)
	p, _ := newProvider(t, s, daytona.Options{})
	count := func(f func()) int {
		before := requests(s)
		f()
		return requests(s) - before
	}
	var h sandbox.Handle
	create := count(func() {
		var err error
		if h, err = p.Create(ctx, sandbox.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { _ = h.Destroy(ctx) })
	pw, _ := newProvider(t, s, daytona.Options{Workdir: "/home/daytona/workspace"})
	createWD := count(func() {
		hw, err := pw.Create(ctx, sandbox.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = hw.Destroy(ctx) })
	})
	write := count(func() {
		if err := h.FS().WriteFile(ctx, "f.txt", []byte("data")); err != nil {
			t.Fatal(err)
		}
	})
	read := count(func() {
		if b, err := h.FS().ReadFile(ctx, "f.txt"); err != nil || string(b) != "data" {
			t.Fatalf("read %q %v", b, err)
		}
	})
	exec := count(func() {
		if _, err := h.Exec(ctx, sandbox.Command{Shell: "echo hi"}); err != nil {
			t.Fatal(err)
		}
	})
	exec2 := count(func() {
		if _, err := h.Exec(ctx, sandbox.Command{Shell: "echo hi"}); err != nil {
			t.Fatal(err)
		}
	})
	writeG := count(func() {
		if err := h.FS().WriteFile(ctx, "f.txt", []byte("data")); err != nil {
			t.Fatal(err)
		}
	})
	readG := count(func() {
		if _, err := h.FS().ReadFile(ctx, "f.txt"); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("requests per operation, corral vs the SDK: create %d vs 1 (with Workdir configured %d vs 1), write %d vs 1, read %d vs 1, "+
		"exec %d (a new session) then %d vs 1 (the SDK's executeCommand combines stdout and stderr; its session exec, which keeps them apart as corral does, is 1 too), after a command (link guard) write %d vs 1, read %d vs 1",
		create, createWD, write, read, exec, exec2, writeG, readG)
	if create > 2 || createWD > 1 || write > 1 || read > 1 || exec2 > 1 || writeG > 2 || readG > 2 {
		t.Fatalf("more round trips than the design: create %d (%d), write %d, read %d, exec %d then %d, guarded write %d, read %d",
			create, createWD, write, read, exec, exec2, writeG, readG)
	}
}
