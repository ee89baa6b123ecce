package execproc

import (
	"maps"
	"sync"

	"github.com/d10ffeed/corral/sandbox"
)

// Env is a sandbox's environment as a wire-backed provider keeps it: the
// create-time variables (CreateOptions.Env) with SetEnv's overlay, in this
// process's memory only — never sent in create-time configuration, never
// persisted — and laid into each command (Options.Env is its Copy). It is
// safe for concurrent use; the zero value is an empty environment.
type Env struct {
	mu sync.Mutex
	m  map[string]string
}

// NewEnv returns an environment holding a copy of vars.
func NewEnv(vars map[string]string) *Env {
	return &Env{m: maps.Clone(vars)}
}

// Set merges vars in, after checking every name (InvalidArgument): the
// contract's Handle.SetEnv.
func (e *Env) Set(vars map[string]string) error {
	for k := range vars {
		if err := sandbox.ValidateEnvName(k); err != nil {
			return err
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = make(map[string]string, len(vars))
	}
	maps.Copy(e.m, vars)
	return nil
}

// Copy returns a copy of the variables.
func (e *Env) Copy() map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]string, len(e.m))
	maps.Copy(out, e.m)
	return out
}
