package daytona_test

import (
	"testing"

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

// TestRequestCounts counts the fake's requests for corral's create, exec,
// write and read, and the official SDK's for the same operations (its
// script's create: 1; executeCommand: 1; uploadFile: 1; downloadFile: 1),
// and logs both. corral spends more round trips: it runs every command in
// a session of its own (create session, exec, log stream, status, delete
// session) to keep stdout and stderr apart, stream, and kill by group,
// where the SDK's executeCommand is one call with one combined output.
func TestRequestCounts(t *testing.T) {
	s := newFake(t)
	ctx := hangGuard(t)
	p, _ := newProvider(t, s, daytona.Options{})
	before := requests(s)
	h, err := p.Create(ctx, sandbox.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Destroy(ctx) })
	create := requests(s) - before
	before = requests(s)
	if _, err := h.Exec(ctx, sandbox.Command{Shell: "echo hi"}); err != nil {
		t.Fatal(err)
	}
	exec := requests(s) - before
	before = requests(s)
	if err := h.FS().WriteFile(ctx, "f.txt", []byte("data")); err != nil {
		t.Fatal(err)
	}
	write := requests(s) - before
	before = requests(s)
	if _, err := h.FS().ReadFile(ctx, "f.txt"); err != nil {
		t.Fatal(err)
	}
	read := requests(s) - before
	t.Logf("requests per operation, corral vs the SDK: create %d vs 1 (create, work-dir, mkdir folder), exec %d vs 1, write %d vs 1, read %d vs 1", create, exec, write, read)
	if create > 3 || exec > 6 || write > 7 || read > 7 {
		t.Fatalf("more round trips than the design: create %d exec %d write %d read %d", create, exec, write, read)
	}
}
