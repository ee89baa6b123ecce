package e2b

import "time"

// The JSON of E2B's control plane (spec/openapi.yml of e2b-dev/E2B and the
// types the e2b npm SDK 2.51.0 sends). Field names are the API's.

// NewSandbox is the body of POST /v2/sandboxes (NewSandboxV2). It has
// envVars, but corral never fills it: secrets travel per command.
type NewSandbox struct {
	TemplateID          string            `json:"templateID"`
	Timeout             int               `json:"timeout,omitempty"`
	AutoPause           *bool             `json:"autoPause,omitempty"`
	Secure              *bool             `json:"secure,omitempty"`
	AllowInternetAccess *bool             `json:"allow_internet_access,omitempty"`
	Network             *NetworkConfig    `json:"network,omitempty"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	EnvVars             map[string]string `json:"envVars,omitempty"`
}

// NetworkConfig is SandboxNetworkConfig (the part corral sets).
type NetworkConfig struct {
	AllowPublicTraffic *bool    `json:"allowPublicTraffic,omitempty"`
	AllowOut           []string `json:"allowOut,omitempty"`
	DenyOut            []string `json:"denyOut,omitempty"`
}

// Sandbox is the answer of create, connect and fork (schema Sandbox).
type Sandbox struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken,omitempty"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// SandboxDetail is the answer of GET /sandboxes/{id}; ListedSandbox (an
// entry of GET /v2/sandboxes) is the same without the tokens.
type SandboxDetail struct {
	TemplateID          string            `json:"templateID"`
	Alias               string            `json:"alias,omitempty"`
	SandboxID           string            `json:"sandboxID"`
	ClientID            string            `json:"clientID"`
	StartedAt           time.Time         `json:"startedAt"`
	EndAt               time.Time         `json:"endAt"`
	EnvdVersion         string            `json:"envdVersion"`
	EnvdAccessToken     string            `json:"envdAccessToken,omitempty"`
	AllowInternetAccess *bool             `json:"allowInternetAccess,omitempty"`
	Domain              *string           `json:"domain,omitempty"`
	CPUCount            int               `json:"cpuCount"`
	MemoryMB            int               `json:"memoryMB"`
	DiskSizeMB          int               `json:"diskSizeMB"`
	Metadata            map[string]string `json:"metadata,omitempty"`
	State               string            `json:"state"`
}

// ConnectRequest is the body of POST /v2/sandboxes/{id}/connect
// (ConnectSandboxV2): it resumes a paused sandbox and only extends its
// timeout.
type ConnectRequest struct {
	Timeout int   `json:"timeout,omitempty"`
	Memory  *bool `json:"memory,omitempty"`
}

// TimeoutRequest is the body of POST /sandboxes/{id}/timeout.
type TimeoutRequest struct {
	Timeout int `json:"timeout"`
}

// PauseRequest is the body of POST /sandboxes/{id}/pause: memory false
// persists the filesystem only.
type PauseRequest struct {
	Memory *bool `json:"memory,omitempty"`
}

// SnapshotRequest is the body of POST /sandboxes/{id}/snapshots.
type SnapshotRequest struct {
	Name string `json:"name,omitempty"`
}

// SnapshotInfo is the answer of POST /sandboxes/{id}/snapshots and an
// entry of GET /snapshots.
type SnapshotInfo struct {
	SnapshotID string   `json:"snapshotID"`
	Names      []string `json:"names"`
}

// ForkRequest is the body of POST /sandboxes/{id}/fork.
type ForkRequest struct {
	Timeout int `json:"timeout,omitempty"`
	Count   int `json:"count,omitempty"`
}

// ForkResult is one entry of the fork answer: a sandbox or an error.
type ForkResult struct {
	Sandbox *Sandbox   `json:"sandbox,omitempty"`
	Error   *ErrorBody `json:"error,omitempty"`
}

// ErrorBody is E2B's error answer (schema Error).
type ErrorBody struct {
	Code      int    `json:"code"`
	ErrorCode string `json:"error_code,omitempty"`
	Message   string `json:"message"`
}

// EntryInfo is one entry of envd's POST /files answer.
type EntryInfo struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// Metadata keys corral sets on its sandboxes.
const (
	// MetaManaged marks corral's sandboxes ("1").
	MetaManaged = "corral"
	// MetaKey carries the sandbox key (CreateOptions.ID): E2B mints the
	// id, so Resume and create reconciliation find a sandbox by it.
	MetaKey = "corral.key"
)

// EnvdPort is the port envd listens on inside every sandbox.
const EnvdPort = 49983

// Header names.
const (
	HeaderAPIKey       = "X-API-KEY"
	HeaderAccessToken  = "X-Access-Token"
	HeaderSandboxID    = "E2b-Sandbox-Id"
	HeaderSandboxPort  = "E2b-Sandbox-Port"
	HeaderTrafficToken = "e2b-traffic-access-token"
)
