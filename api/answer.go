package api

// Answer is the body of POST /v1/runs/{id}/approvals: an answer to an
// approval request of a run whose turn is live and waits for it (the acp
// and claude-code harnesses and opencode's server mode, with their
// approvalWait option). The run's approval.waiting event
// names the request; an answer to a request nobody waits for goes with the
// thread's next run instead (StartRun.Approvals).
type Answer struct {
	ApprovalID string `json:"approvalId"`
	Allow      bool   `json:"allow"`
}
