package store

import "fmt"

// Opt is one field of a patch. It has three states, so that a patch can say
// "leave this field as it is" and "clear this field" apart:
//
//   - the zero value leaves the field untouched (the key is absent);
//   - Set(v) stores v;
//   - Clear[T]() clears the field (a store writes NULL; it reads back absent).
//
// A store must branch on the state, never on the value: a store that drops
// cleared fields from its UPDATE passes every other test and then reports
// re-attached runs as detached forever.
type Opt[T any] struct {
	state optState
	v     T
}

type optState uint8

const (
	optLeave optState = iota
	optSet
	optClear
)

// Set returns an Opt that stores v.
func Set[T any](v T) Opt[T] { return Opt[T]{state: optSet, v: v} }

// Clear returns an Opt that clears the field.
func Clear[T any]() Opt[T] { return Opt[T]{state: optClear} }

// Leave reports whether the field is left as it is (the zero Opt).
func (o Opt[T]) Leave() bool { return o.state == optLeave }

// IsSet reports whether the Opt stores a value.
func (o Opt[T]) IsSet() bool { return o.state == optSet }

// IsClear reports whether the Opt clears the field.
func (o Opt[T]) IsClear() bool { return o.state == optClear }

// Value returns the value to store and true, or the zero value and false
// when the Opt leaves or clears the field.
func (o Opt[T]) Value() (T, bool) { return o.v, o.state == optSet }

// String describes the Opt for logs and test failures.
func (o Opt[T]) String() string {
	switch o.state {
	case optSet:
		return fmt.Sprintf("set(%v)", o.v)
	case optClear:
		return "clear"
	}
	return "leave"
}
