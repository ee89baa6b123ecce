package aguitest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/aguitest"
)

// goldenRuns reads every harness's golden event files (the translators'
// output for their recorded fixtures, kept current by each harness's
// golden test): JSON arrays (*.golden.json) and one event a line
// (*.golden.ndjson).
func goldenRuns(t *testing.T) []aguitest.Run {
	t.Helper()
	var files []string
	for _, pat := range []string{"*.golden.json", "*.golden.ndjson"} {
		m, err := filepath.Glob(filepath.Join("..", "..", "harness", "*", "testdata", pat))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	var runs []aguitest.Run
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(f, filepath.Join("..", "..")+string(filepath.Separator))
		run := aguitest.Run{Name: name}
		if strings.HasSuffix(f, ".json") {
			if err := json.Unmarshal(b, &run.Events); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		} else {
			sc := bufio.NewScanner(bytes.NewReader(b))
			sc.Buffer(make([]byte, 1<<20), 1<<24)
			for sc.Scan() {
				if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
					run.Events = append(run.Events, json.RawMessage(bytes.Clone(line)))
				}
			}
		}
		runs = append(runs, run)
	}
	if len(runs) == 0 {
		t.Fatal("no golden event files under harness/*/testdata")
	}
	return runs
}

// TestHarnessFixturesPassAGUI: every event of every harness's recorded
// fixture (command output, tool calls, reasoning, approvals, failures,
// interrupted runs) passes @ag-ui/core's schemas with nothing stripped,
// and every fixture's run passes @ag-ui/client's verifyEvents.
func TestHarnessFixturesPassAGUI(t *testing.T) {
	runs := goldenRuns(t)
	perHarness := map[string]int{}
	for _, r := range runs {
		perHarness[strings.Split(r.Name, string(filepath.Separator))[1]]++
	}
	t.Logf("fixtures per harness: %v", perHarness)
	aguitest.Require(t, runs...)
}
