package event_test

import (
	"fmt"
	"strings"

	"github.com/d10ffeed/corral/event"
)

func ExampleBlocks() {
	ids := &event.IDs{RunID: "run"}
	b := event.Blocks{IDs: ids}
	var evs []event.Event
	evs = append(evs, b.Reasoning("thinking")...)
	evs = append(evs, b.Text("Hel")...)
	evs = append(evs, b.Text("lo")...)
	evs = append(evs, b.Text("")...) // nothing
	evs = append(evs, b.Close()...)
	for _, e := range evs {
		fmt.Println(strings.TrimSpace(fmt.Sprint(e.Type, " ", e.MessageID, " ", e.Delta)))
	}
	// Output:
	// REASONING_START run-reasoning-1
	// REASONING_MESSAGE_START run-reasoning-1
	// REASONING_MESSAGE_CONTENT run-reasoning-1 thinking
	// REASONING_MESSAGE_END run-reasoning-1
	// REASONING_END run-reasoning-1
	// TEXT_MESSAGE_START run-msg-1
	// TEXT_MESSAGE_CONTENT run-msg-1 Hel
	// TEXT_MESSAGE_CONTENT run-msg-1 lo
	// TEXT_MESSAGE_END run-msg-1
}
