// Package harnesstest holds what the harness packages' tests share: feeding
// a recorded journal through a translator, the invariants every
// translation holds, and golden files of events.
package harnesstest

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
)

// Translate feeds a whole journal (one record per line) and the agent's
// exit code through a fresh translator of h.
func Translate(h harness.Harness, run harness.Run, journal []byte, exit int) []event.Event {
	tr := h.Translator(run)
	evs := tr.Begin()
	sc := bufio.NewScanner(bytes.NewReader(journal))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		evs = append(evs, tr.Line(sc.Bytes())...)
	}
	return append(evs, tr.End(exit)...)
}

// Fixture is a recorded journal in testdata/<Name>.jsonl, its exit code,
// and what it shows; its events are kept in testdata/<Name>.golden.json.
type Fixture struct {
	Name string
	Exit int
	What string
}

// Golden translates each fixture with h and compares the events with the
// golden file (rewriting it when update is set), checks Invariants, and
// checks that a second translation gives the same events.
func Golden(t *testing.T, h harness.Harness, run harness.Run, fixtures []Fixture, update bool) {
	t.Helper()
	for _, f := range fixtures {
		t.Run(f.Name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", f.Name+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			got := Translate(h, run, in, f.Exit)
			Invariants(t, got)
			var buf bytes.Buffer
			buf.WriteString("[\n")
			for i, e := range got {
				if i > 0 {
					buf.WriteString(",\n")
				}
				buf.Write(e.Marshal())
			}
			buf.WriteString("\n]\n")
			golden := filepath.Join("testdata", f.Name+".golden.json")
			if update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("events differ from %s (%s); run go test -update and review the diff.\ngot:\n%s", golden, f.What, buf.Bytes())
			}
			if again := Translate(h, run, in, f.Exit); !reflect.DeepEqual(got, again) {
				t.Error("the translator is not deterministic")
			}
		})
	}
}

// Invariants checks what every translation must hold: RUN_STARTED first,
// exactly one terminal event and it last, every tool call started once and
// resulted once, messages opened before content and closed once.
func Invariants(t testing.TB, evs []event.Event) {
	t.Helper()
	if len(evs) < 2 || evs[0].Type != event.RunStarted || !evs[len(evs)-1].Terminal() {
		t.Fatalf("want RUN_STARTED first and a terminal event last, got %d events", len(evs))
	}
	tools := map[string]int{}  // 1 started, 2 resulted
	msgs := map[string]bool{}  // text and reasoning messages
	spans := map[string]bool{} // reasoning spans
	for i, e := range evs {
		if e.Terminal() && i != len(evs)-1 {
			t.Errorf("terminal event %d is not last", i)
		}
		switch e.Type {
		case event.ToolCallStart:
			if _, dup := tools[e.ToolCallID]; dup {
				t.Errorf("tool call %s started twice", e.ToolCallID)
			}
			tools[e.ToolCallID] = 1
		case event.ToolCallArgs, event.ToolCallEnd:
			if tools[e.ToolCallID] != 1 {
				t.Errorf("%s for tool call %s outside its start and result", e.Type, e.ToolCallID)
			}
		case event.ToolCallResult:
			if tools[e.ToolCallID] != 1 {
				t.Errorf("result for tool call %s that is not open", e.ToolCallID)
			}
			tools[e.ToolCallID] = 2
		case event.ReasoningStart:
			if spans[e.MessageID] {
				t.Errorf("reasoning span %s opened twice", e.MessageID)
			}
			spans[e.MessageID] = true
		case event.ReasoningEnd:
			if !spans[e.MessageID] {
				t.Errorf("end of reasoning span %s that is not open", e.MessageID)
			}
			spans[e.MessageID] = false
		case event.TextMessageStart, event.ReasoningMessageStart:
			if msgs[e.MessageID] {
				t.Errorf("message %s opened twice", e.MessageID)
			}
			msgs[e.MessageID] = true
		case event.TextMessageContent, event.ReasoningContent:
			if !msgs[e.MessageID] {
				t.Errorf("content for message %s that is not open", e.MessageID)
			}
		case event.TextMessageEnd, event.ReasoningMessageEnd:
			if !msgs[e.MessageID] {
				t.Errorf("end of message %s that is not open", e.MessageID)
			}
			msgs[e.MessageID] = false
		}
	}
	for id, s := range tools {
		if s != 2 {
			t.Errorf("tool call %s has no result", id)
		}
	}
	for id, open := range msgs {
		if open {
			t.Errorf("message %s never ends", id)
		}
	}
	for id, open := range spans {
		if open {
			t.Errorf("reasoning span %s never ends", id)
		}
	}
}
