package api

// Stderr is the body of GET /v1/runs/{id}/stderr: the end of what the run's
// agent wrote to its standard error (at most 64 KiB, or ?max= bytes), with
// the run's secrets redacted.
type Stderr struct {
	Stderr string `json:"stderr"`
}
