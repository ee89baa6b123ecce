package claudecode

import (
	"context"
	"path"
	"strconv"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
)

// This file projects the workspace into Claude Code's configuration for a
// run: skills through a per-run plugin directory, MCP servers through the
// --mcp-config file (see the package comment).

const (
	// permissionServer is the MCP server name of corral's permission tool
	// (promptTool is mcp__<permissionServer>__approve); a workspace server
	// may not use it.
	permissionServer = "corral"
	// pluginName is the name of the per-run plugin that carries the
	// workspace's skills: the model sees them as "corral-workspace:<skill>".
	pluginName = "corral-workspace"
)

// checkMCPServers validates the workspace's servers and refuses the name
// the permission tool uses. Errors are InvalidArgument and never carry a
// secret value.
func checkMCPServers(req harness.Request) error {
	if err := sandbox.ValidateMCPServers(req.MCPServers, req.Secrets); err != nil {
		return err
	}
	for i, s := range req.MCPServers {
		if s.Name == permissionServer {
			return sandbox.Errorf(sandbox.InvalidArgument, "workspace", "mcpServers["+strconv.Itoa(i)+"]",
				"MCP server name %q is reserved for corral's permission tool in the claude-code harness; rename the server", s.Name)
		}
	}
	return nil
}

// projectSkills links the workspace's skills into a plugin directory in
// the run directory and returns the directory for --plugin-dir, or "" when
// the workspace has no skills.
func projectSkills(ctx context.Context, h sandbox.Handle, req harness.Request) (string, error) {
	const op = "claudecode.prepare"
	skills, err := harness.FindSkills(ctx, h, req)
	if err != nil || len(skills) == 0 {
		return "", err
	}
	if req.RunDir == "" {
		return "", sandbox.Errorf(sandbox.FailedPrecondition, op, req.RunID, "the workspace's skills need a run directory (the per-run plugin that carries them lives there)")
	}
	dir := path.Join(req.RunDir, "claude-plugin")
	manifest := path.Join(dir, ".claude-plugin", "plugin.json")
	if err := harness.WriteFile(ctx, h, manifest, []byte(mustJSON(map[string]any{
		"name": pluginName, "description": "The corral workspace's skills, linked for this run.",
	})+"\n"), "600"); err != nil {
		return "", sandbox.Wrap(sandbox.Internal, op, manifest, err)
	}
	if err := harness.LinkSkills(ctx, h, path.Join(dir, "skills"), skills); err != nil {
		return "", err
	}
	return dir, nil
}

// instructionsFile returns the absolute path of the workspace's CLAUDE.md,
// else its AGENTS.md, or "" when it has neither.
func instructionsFile(ctx context.Context, h sandbox.Handle, req harness.Request) (string, error) {
	root := req.WorkspaceRoot
	if root == "" {
		root = h.WorkspaceRoot()
	}
	for _, name := range []string{"CLAUDE.md", "AGENTS.md"} {
		ok, err := h.FS().Exists(ctx, name)
		if err != nil && sandbox.CodeOf(err) != sandbox.PermissionDenied {
			return "", sandbox.Wrap(sandbox.Internal, "claudecode.prepare", name, err)
		}
		if ok {
			return path.Join(root, name), nil
		}
	}
	return "", nil
}
