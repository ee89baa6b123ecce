package acp_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/acp"
)

func fixtureLines(t testing.TB, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	for _, l := range bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n")) {
		lines = append(lines, l)
	}
	return lines
}

// TestGolden translates every journal fixture and compares the events with
// its golden file.
func TestGolden(t *testing.T) {
	journals, err := filepath.Glob(filepath.Join("testdata", "*.journal.ndjson"))
	if err != nil || len(journals) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, j := range journals {
		name := strings.TrimSuffix(filepath.Base(j), ".journal.ndjson")
		t.Run(name, func(t *testing.T) {
			code := 0
			if b, err := os.ReadFile(filepath.Join("testdata", name+".exit")); err == nil {
				code, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			}
			evs := translate(acp.New(acp.Options{}).Translator(harness.Run{RunID: "run-1", ThreadID: "thread-1"}), fixtureLines(t, j), code)
			checkWellFormed(t, evs)
			got := dump(evs)
			golden := filepath.Join("testdata", name+".golden.ndjson")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("events differ from %s (run with -update to accept):\n%s", golden, lineDiff(string(want), got))
			}
		})
	}
}

// lineDiff shows the first differing line.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return "line " + strconv.Itoa(i+1) + ":\n want " + a + "\n  got " + b
		}
	}
	return ""
}

// TestTranslatorIsDeterministic replays each fixture in two translators fed
// the same lines and expects identical events (what a takeover relies on).
func TestTranslatorIsDeterministic(t *testing.T) {
	journals, _ := filepath.Glob(filepath.Join("testdata", "*.journal.ndjson"))
	for _, j := range journals {
		lines := fixtureLines(t, j)
		run := harness.Run{RunID: "run-d", ThreadID: "t"}
		a := translate(acp.New(acp.Options{}).Translator(run), lines, 0)
		b := translate(acp.New(acp.Options{}).Translator(run), lines, 0)
		if dump(a) != dump(b) {
			t.Errorf("%s: two replays differ", j)
		}
	}
}

// FuzzTranslate feeds arbitrary journal lines to the translator: it must
// never panic, and a run must still start and end with one terminal event.
func FuzzTranslate(f *testing.F) {
	journals, _ := filepath.Glob(filepath.Join("testdata", "*.journal.ndjson"))
	for _, j := range journals {
		for _, l := range fixtureLines(f, j) {
			f.Add(l, 0)
		}
	}
	f.Add([]byte(`{"corral_acp":"update","params":{"update":{"sessionUpdate":"tool_call_update","toolCallId":"x","status":"completed","rawOutput":null}}}`), 1)
	f.Add([]byte(`{"corral_acp":"permission","toolCall":{"toolCallId":""}}`), 0)
	f.Fuzz(func(t *testing.T, data []byte, code int) {
		tr := acp.New(acp.Options{}).Translator(harness.Run{RunID: "r", ThreadID: "t"})
		evs := tr.Begin()
		for _, l := range bytes.Split(data, []byte("\n")) {
			evs = append(evs, tr.Line(l)...)
		}
		evs = append(evs, tr.End(code)...)
		terminals := 0
		for _, e := range evs {
			if e.Terminal() {
				terminals++
			}
			_ = e.Marshal()
		}
		if evs[0].Type != event.RunStarted || terminals != 1 || !evs[len(evs)-1].Terminal() {
			t.Fatalf("malformed run: %s", dump(evs))
		}
	})
}
