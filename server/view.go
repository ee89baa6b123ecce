package server

import (
	"context"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/store"
)

// What the API adds to stored records for the people reading it (the
// console): a run's provider, a sandbox's state.

// apiRun converts a stored run and names its provider (that of its
// definition, when this daemon knows it).
func (s *Server) apiRun(rec store.Run, lastSeq int64) api.Run {
	out := api.RunFrom(rec, lastSeq)
	if def, ok := s.opts.Runner.Definition(rec.DefinitionID); ok && def.Provider != nil {
		out.Provider = def.Provider.Name()
	}
	return out
}

// Sandbox states (api.Sandbox.State).
const (
	// sandboxBusy: a run that is not over uses the sandbox.
	sandboxBusy = "busy"
	// sandboxIdle: the sandbox exists and no run uses it.
	sandboxIdle = "idle"
	// sandboxReclaimed: the sandbox was reclaimed; only its snapshot (if
	// any) is left, and the thread's next run restores or recreates it.
	sandboxReclaimed = "reclaimed"
)

// sandboxes converts stored instances of the tenant, each with its state:
// busy when a running run of the tenant holds its key.
func (s *Server) sandboxes(ctx context.Context, tenant string, list []store.Instance) ([]api.Sandbox, error) {
	running, err := s.st.ListRuns(ctx, store.RunFilter{Tenant: tenant, Statuses: []store.RunStatus{store.RunRunning}})
	if err != nil {
		return nil, err
	}
	busy := make(map[string]string, len(running)) // sandbox key → run id
	for _, r := range running {
		if r.SandboxKey != "" {
			busy[r.SandboxKey] = r.ID
		}
	}
	out := make([]api.Sandbox, 0, len(list))
	for _, in := range list {
		if in.Tenant != tenant {
			continue
		}
		sb := api.SandboxFrom(in)
		switch {
		case busy[in.Key] != "":
			sb.State, sb.RunningRunID = sandboxBusy, busy[in.Key]
		case in.ProviderSandboxID == "":
			sb.State = sandboxReclaimed
		default:
			sb.State = sandboxIdle
		}
		out = append(out, sb)
	}
	return out, nil
}
