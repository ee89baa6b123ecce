package railway

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
)

// The GraphQL documents, as the official SDK (railway 3.11) prints them.
const (
	fields   = "\n\nfragment RailwaySandboxFields on Sandbox {\n  id\n  status\n  networkIsolation\n  environmentId\n  region\n  idleTimeoutMinutes\n  createdAt\n}"
	cpFields = "\n\nfragment RailwaySandboxCheckpointFields on SandboxCheckpoint {\n  id\n  key\n  environmentId\n  createdAt\n}"

	qSandbox          = "query RailwaySandbox($environmentId: String!, $id: String!) {\n  sandbox(environmentId: $environmentId, id: $id) {\n    ...RailwaySandboxFields\n  }\n}" + fields
	qSandboxes        = "query RailwaySandboxes($environmentId: String!, $first: Int, $after: String, $before: String, $last: Int) {\n  sandboxes(\n    environmentId: $environmentId\n    first: $first\n    after: $after\n    before: $before\n    last: $last\n  ) {\n    edges {\n      node {\n        ...RailwaySandboxFields\n      }\n    }\n    pageInfo {\n      hasNextPage\n      endCursor\n    }\n  }\n}" + fields
	mCreate           = "mutation RailwaySandboxCreate($input: SandboxCreateInput!) {\n  sandboxCreate(input: $input) {\n    ...RailwaySandboxFields\n  }\n}" + fields
	mDestroy          = "mutation RailwaySandboxDestroy($id: String!, $environmentId: String!) {\n  sandboxDestroy(id: $id, environmentId: $environmentId) {\n    ...RailwaySandboxFields\n  }\n}" + fields
	qCheckpoints      = "query RailwaySandboxCheckpoints($environmentId: String!) {\n  sandboxCheckpoints(environmentId: $environmentId) {\n    ...RailwaySandboxCheckpointFields\n  }\n}" + cpFields
	mCheckpoint       = "mutation RailwaySandboxCheckpointCreate($environmentId: String!, $name: String!, $sandboxId: String!) {\n  sandboxCheckpointCreate(\n    environmentId: $environmentId\n    name: $name\n    sandboxId: $sandboxId\n  ) {\n    ...RailwaySandboxCheckpointFields\n  }\n}" + cpFields
	mCheckpointDelete = "mutation RailwaySandboxCheckpointDelete($environmentId: String!, $id: ID!) {\n  sandboxCheckpointDelete(environmentId: $environmentId, id: $id)\n}"
	mShellToken       = "mutation RailwayGenerateShellToken($input: ShellTokenInput!) {\n  generateShellToken(input: $input)\n}"
)

// SandboxInfo is RailwaySandboxFields.
type SandboxInfo struct {
	ID                 string `json:"id"`
	Status             string `json:"status"`
	NetworkIsolation   string `json:"networkIsolation"`
	EnvironmentID      string `json:"environmentId"`
	Region             string `json:"region"`
	IdleTimeoutMinutes *int   `json:"idleTimeoutMinutes"`
	CreatedAt          string `json:"createdAt"`
}

// CheckpointInfo is RailwaySandboxCheckpointFields.
type CheckpointInfo struct {
	ID            string `json:"id"`
	Key           string `json:"key"`
	EnvironmentID string `json:"environmentId"`
	CreatedAt     string `json:"createdAt"`
}

// CreateInput is SandboxCreateInput as the SDK fills it.
type CreateInput struct {
	EnvironmentID      string            `json:"environmentId"`
	Template           *TemplateInput    `json:"template,omitempty"`
	SourceSandboxID    string            `json:"sourceSandboxId,omitempty"`
	IdleTimeoutMinutes *int              `json:"idleTimeoutMinutes,omitempty"`
	NetworkIsolation   string            `json:"networkIsolation,omitempty"`
	Region             string            `json:"region,omitempty"`
	Variables          map[string]string `json:"variables,omitempty"`
}

// TemplateInput names a checkpoint to boot from.
type TemplateInput struct {
	Name string `json:"name"`
}

// gone reports the statuses in which a sandbox counts as deleted.
func gone(status string) bool {
	return status == "DESTROYED" || status == "DESTROYING" || status == "FAILED"
}

// gql makes one GraphQL call and decodes data into out. Backboard answers
// a resolver's refusal with HTTP 200 and errors: "Not Authorized" is
// PermissionDenied, "… not found" NotFound, anything else
// FailedPrecondition with the message.
func (p *Provider) gql(ctx context.Context, op, id, query string, vars map[string]any, idempotent bool, out any) error {
	var body struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	resp, err := p.c.Do(ctx, cloudhttp.Request{Op: op, ID: id, Method: http.MethodPost, Path: p.gqlPath,
		JSON: map[string]any{"query": query, "variables": vars}, Idempotent: idempotent}, &body)
	if err != nil {
		return err
	}
	if len(body.Errors) > 0 {
		msg := body.Errors[0].Message
		rid := ""
		if resp != nil && resp.RequestID != "" {
			rid = " (request " + resp.RequestID + ")"
		}
		code := sandbox.FailedPrecondition
		low := strings.ToLower(msg)
		switch {
		case strings.Contains(low, "not authorized") || strings.Contains(low, "unauthorized") || strings.Contains(low, "forbidden"):
			code = sandbox.PermissionDenied
		case strings.Contains(low, "not found"):
			code = sandbox.NotFound
		case strings.Contains(low, "rate limit"):
			code = sandbox.ResourceExhausted
		}
		return sandbox.Errorf(code, op, id, "railway: %s%s", msg, rid)
	}
	if out != nil && len(body.Data) > 0 {
		if err := json.Unmarshal(body.Data, out); err != nil {
			return sandbox.Errorf(sandbox.Internal, op, id, "railway: the answer does not decode: %v", err)
		}
	}
	return nil
}
