package main

import (
	"fmt"
	"io"
	"sync"
)

// pullPrinter returns a progress callback that prints each step a provider
// reports while it prepares (an image pull: one per layer state change) as
// a line on w.
func pullPrinter(w io.Writer) func(string) {
	var mu sync.Mutex
	return func(step string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "corral: %s\n", step)
	}
}
