package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/d10ffeed/corral/api"
)

// Answer answers an approval request of a live run whose turn waits for
// it (POST /v1/runs/{id}/approvals; see api.Answer).
func (c *Client) Answer(ctx context.Context, runID, approvalID string, allow bool) error {
	var out api.Answer
	return c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(runID)+"/approvals", api.Answer{ApprovalID: approvalID, Allow: allow}, &out)
}
