package main

import (
	"fmt"
	"io"
	"sync"

	"github.com/d10ffeed/corral/provider/docker"
)

// pullPrinter returns an OnPull callback that prints each pull step (one
// per layer state change, as the provider reports them) as a line on w.
func pullPrinter(w io.Writer) func(docker.PullProgress) {
	var mu sync.Mutex
	return func(p docker.PullProgress) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "corral: %s\n", p)
	}
}
