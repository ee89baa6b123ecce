package daytona

// CreateSandbox is the body of POST /sandbox (the api-client's
// CreateSandbox, the fields corral sets). Env stays empty: secrets never
// reach the sandbox's stored configuration.
type CreateSandbox struct {
	Name               string            `json:"name,omitempty"`
	Snapshot           string            `json:"snapshot,omitempty"`
	Env                map[string]string `json:"env"`
	Labels             map[string]string `json:"labels"`
	Target             string            `json:"target,omitempty"`
	AutoStopInterval   *int              `json:"autoStopInterval,omitempty"`
	AutoDeleteInterval *int              `json:"autoDeleteInterval,omitempty"`
	NetworkBlockAll    bool              `json:"networkBlockAll,omitempty"`
	NetworkAllowList   string            `json:"networkAllowList,omitempty"`
	DomainAllowList    string            `json:"domainAllowList,omitempty"`
}

// Sandbox is the part of the API's Sandbox (and SandboxListItem) corral
// reads.
type Sandbox struct {
	ID               string            `json:"id"`
	Name             string            `json:"name"`
	Snapshot         string            `json:"snapshot,omitempty"`
	Labels           map[string]string `json:"labels"`
	State            string            `json:"state"`
	ErrorReason      string            `json:"errorReason,omitempty"`
	NetworkBlockAll  bool              `json:"networkBlockAll"`
	AutoStopInterval int               `json:"autoStopInterval"`
	CreatedAt        string            `json:"createdAt,omitempty"`
	ToolboxProxyURL  string            `json:"toolboxProxyUrl,omitempty"`
}

// ListSandboxes is the answer of GET /sandbox.
type ListSandboxes struct {
	Items      []Sandbox `json:"items"`
	NextCursor *string   `json:"nextCursor"`
}

// SessionExecuteRequest is the body of POST
// /process/session/{id}/exec.
type SessionExecuteRequest struct {
	Command           string `json:"command"`
	RunAsync          bool   `json:"runAsync"`
	SuppressInputEcho bool   `json:"suppressInputEcho,omitempty"`
}

// SessionExecuteResponse is its answer (202 with cmdId when async).
type SessionExecuteResponse struct {
	CmdID    string `json:"cmdId"`
	ExitCode *int   `json:"exitCode,omitempty"`
}

// Command is GET /process/session/{id}/command/{cmdId}.
type Command struct {
	ID       string `json:"id"`
	Command  string `json:"command"`
	ExitCode *int   `json:"exitCode,omitempty"`
}

// PortPreviewURL is GET /sandbox/{id}/ports/{port}/preview-url.
type PortPreviewURL struct {
	SandboxID string `json:"sandboxId"`
	URL       string `json:"url"`
	Token     string `json:"token"`
}

// Stream markers in a session command's log.
var (
	stdoutMarker = []byte{1, 1, 1}
	stderrMarker = []byte{2, 2, 2}
)

// SnapshotRef is the part of GET /snapshots/{idOrName} (SnapshotDto)
// the provider reads: DELETE /snapshots/{id} takes the id, not the name.
type SnapshotRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}
