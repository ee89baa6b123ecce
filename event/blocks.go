package event

// Blocks tracks the open text message and reasoning message of a stream,
// the state every harness translator keeps: a text delta closes open
// reasoning and opens a message when none is open; a reasoning delta does
// the same the other way round. Ids come from IDs ("msg", "reasoning"), so
// replaying a journal yields the same ids.
type Blocks struct {
	IDs       *IDs
	text      string
	reasoning string
}

// Text returns the events for a text delta: REASONING_END for open
// reasoning, TEXT_MESSAGE_START for a new message, TEXT_MESSAGE_CONTENT.
// An empty delta yields nothing.
func (b *Blocks) Text(delta string) []Event {
	if delta == "" {
		return nil
	}
	out := b.CloseReasoning()
	if b.text == "" {
		b.text = b.IDs.Next("msg")
		out = append(out, Event{Type: TextMessageStart, MessageID: b.text, Role: "assistant"})
	}
	return append(out, Event{Type: TextMessageContent, MessageID: b.text, Delta: delta})
}

// Reasoning returns the events for a reasoning delta: TEXT_MESSAGE_END for
// an open message, REASONING_START and REASONING_MESSAGE_START for new
// reasoning, REASONING_MESSAGE_CONTENT. An empty delta yields nothing.
func (b *Blocks) Reasoning(delta string) []Event {
	if delta == "" {
		return nil
	}
	out := b.CloseText()
	if b.reasoning == "" {
		b.reasoning = b.IDs.Next("reasoning")
		out = append(out, OpenReasoning(b.reasoning)...)
	}
	return append(out, Event{Type: ReasoningContent, MessageID: b.reasoning, Delta: delta})
}

// TextID is the open text message's id, or "".
func (b *Blocks) TextID() string { return b.text }

// CloseText ends the open text message, if any.
func (b *Blocks) CloseText() []Event {
	if b.text == "" {
		return nil
	}
	id := b.text
	b.text = ""
	return []Event{{Type: TextMessageEnd, MessageID: id}}
}

// CloseReasoning ends the open reasoning, if any.
func (b *Blocks) CloseReasoning() []Event {
	if b.reasoning == "" {
		return nil
	}
	id := b.reasoning
	b.reasoning = ""
	return CloseReasoning(id)
}

// OpenReasoning opens a reasoning span and its one message, both of id:
// REASONING_START, REASONING_MESSAGE_START.
func OpenReasoning(id string) []Event {
	return []Event{{Type: ReasoningStart, MessageID: id}, {Type: ReasoningMessageStart, MessageID: id}}
}

// CloseReasoning closes what OpenReasoning opened: REASONING_MESSAGE_END,
// REASONING_END.
func CloseReasoning(id string) []Event {
	return []Event{{Type: ReasoningMessageEnd, MessageID: id}, {Type: ReasoningEnd, MessageID: id}}
}

// Close ends whatever is open: the text message, then the reasoning.
func (b *Blocks) Close() []Event { return append(b.CloseText(), b.CloseReasoning()...) }
