package run

import (
	"reflect"
	"testing"

	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/sandbox"
)

// TestParsePatch checks the one patch parser behind file.changed and the
// OnFile hook: created, deleted and changed files, names with spaces, a
// content line that looks like a header, a malformed header.
func TestParsePatch(t *testing.T) {
	patch := []byte(`diff --git a/new.txt b/new.txt
new file mode 100644
index 0000000..e69de29
--- /dev/null
+++ b/new.txt
@@ -0,0 +1 @@
+diff --git a/fake b/fake
diff --git a/old.txt b/old.txt
deleted file mode 100644
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-new file mode 100644
diff --git a/dir/with space.go b/dir/with space.go
index 1..2 100644
--- a/dir/with space.go
+++ b/dir/with space.go
@@ -1 +1 @@
-a
+b
diff --git malformed
new file mode 100644
`)
	want := []patchFile{{"new.txt", "create"}, {"old.txt", "delete"}, {"dir/with space.go", "change"}}
	if got := parsePatch(patch); !reflect.DeepEqual(got, want) {
		t.Errorf("parsePatch = %+v, want %+v", got, want)
	}
	ev := fileChanged(&journal.Diff{Patch: patch})
	if ev.Name != "file.changed" || !reflect.DeepEqual(fileEvents(patch), []sandbox.FileEvent{
		{Op: "create", Path: "/workspace/new.txt"}, {Op: "delete", Path: "/workspace/old.txt"}, {Op: "change", Path: "/workspace/dir/with space.go"},
	}) {
		t.Errorf("fileChanged %s, fileEvents %+v", ev.Value, fileEvents(patch))
	}
}
