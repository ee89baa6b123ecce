package run

import (
	"context"
	"maps"
	"slices"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// AgentToolsServer is the name of the MCP server entry the runner adds for
// the daemon's tools (the checkpoint tools) to each run's agent. A
// workspace or run MCP server of that name is the user's own: the runner
// then adds nothing.
// (Not "corral": the claude-code harness keeps that name for its
// permission tool.)
const AgentToolsServer = "corral-tools"

// AgentToolsTokenSecret is the name under which the run's tools token
// travels to the harness (a ${secret:NAME} reference in the entry's
// Authorization header, so it reaches the agent the way every MCP secret
// does: its environment and a per-run configuration file, never argv) and
// under which events are scrubbed of it.
const AgentToolsTokenSecret = "CORRAL_TOOLS_TOKEN"

// AgentTools is the daemon's tools for a run's own agent as the runner
// sees it (package server implements it): where a sandbox reaches them
// and the run's token for them.
type AgentTools interface {
	// Endpoint returns the URL at which an agent in a sandbox of the
	// provider reaches the run's tools; ok is false when sandboxes of that
	// provider cannot reach the daemon (the implementation says so once).
	Endpoint(provider string, run store.Run) (url string, ok bool)
	// Token returns the run's tools token: derived from the run's record
	// and the daemon's key, so every replica with the key derives the
	// same one and none is stored.
	Token(run store.Run) string
}

// withAgentTools adds the daemon's tools server to the run's MCP servers
// and its token to the secrets the harness reads, when the runner has
// tools, the sandbox can reach them (its provider's, and no egress
// allow-list) and no server already has the name.
func (d *driver) withAgentTools(mcp []sandbox.MCPServer, secrets sandbox.Secrets) ([]sandbox.MCPServer, sandbox.Secrets) {
	t := d.r.opts.Tools
	if t == nil || slices.ContainsFunc(mcp, func(s sandbox.MCPServer) bool { return s.Name == AgentToolsServer }) {
		return mcp, secrets
	}
	if w, ok := d.h.(harness.Warmer); ok && w.Warm(d.start.Options) {
		// A warm agent outlives this run; the run's token would not.
		d.r.log.Debug("run: no agent tools for a warm session", "run", d.run.ID)
		return mcp, secrets
	}
	if len(d.def.Policy.EgressList()) > 0 {
		// The sandbox reaches only its allow-list, through the gateway:
		// not the daemon.
		return mcp, secrets
	}
	if _, taken := secrets.Value(AgentToolsTokenSecret); taken {
		return mcp, secrets
	}
	u, ok := t.Endpoint(d.def.Provider.Name(), d.run)
	if !ok {
		return mcp, secrets
	}
	mcp = append(slices.Clip(mcp), sandbox.MCPServer{Name: AgentToolsServer, Type: sandbox.MCPHTTP, URL: u,
		Headers: map[string]string{"Authorization": "Bearer ${secret:" + AgentToolsTokenSecret + "}"}})
	return mcp, secrets.With(AgentToolsTokenSecret, t.Token(d.run))
}

// withToolsToken adds the run's tools token to the values events are
// scrubbed of.
func (d *driver) withToolsToken(m map[string]string) map[string]string {
	if d.r.opts.Tools == nil {
		return m
	}
	m = maps.Clone(m)
	if m == nil {
		m = map[string]string{}
	}
	m[AgentToolsTokenSecret] = d.r.opts.Tools.Token(d.run)
	return m
}

// toolsTokenOf returns the tools token of the live run a capture happens
// during, to redact: a harness may have put it into a workspace file (the
// grok-build harness merges MCP servers into .grok/config.toml for the
// run), which a checkpoint the agent saves would otherwise keep.
func (r *Runner) toolsTokenOf(ctx context.Context, runID string) []string {
	if r.opts.Tools == nil || runID == "" {
		return nil
	}
	rec, ok, err := r.store.GetRun(ctx, runID)
	if err != nil || !ok {
		return nil
	}
	return []string{r.opts.Tools.Token(rec)}
}
