package cloudflare

import "time"

// The bridge API's wire types (bridge/README.md is the specification; the
// bridge's src/index.ts and the fake in cloudflarefake speak it).

// Sandbox is the bridge's sandbox record.
type Sandbox struct {
	// ID is the sandbox's name: the Durable Object name given to
	// getSandbox, the key corral asked for.
	ID string `json:"id"`
	// Labels are the create's labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Root is the workspace's absolute path in the container.
	Root string `json:"root"`
	// CreatedAt is when the bridge first created it.
	CreatedAt time.Time `json:"createdAt"`
}

// CreateRequest is the body of POST /v1/sandboxes. It has no environment:
// secrets never reach create-time configuration.
type CreateRequest struct {
	ID     string            `json:"id"`
	Labels map[string]string `json:"labels,omitempty"`
}

// ListResponse is the answer of GET /v1/sandboxes.
type ListResponse struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

// EnvRequest is the body of POST /v1/sandboxes/{id}/env (the SDK's
// setEnvVars).
type EnvRequest struct {
	Env map[string]string `json:"env"`
}

// BridgeVersion is the bridge API's version this provider speaks (the
// bridge's VERSION in bridge/src/index.ts, reported by GET /v1/health).
const BridgeVersion = "0.1.0"

// Health is the answer of GET /v1/health.
type Health struct {
	OK      bool   `json:"ok"`
	Bridge  string `json:"bridge"`
	Version string `json:"version"`
}

// ErrorBody is every error answer's body.
type ErrorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	Status  int    `json:"status"`
}

// Message is a text message on the exec WebSocket.
type Message struct {
	// Type is start, started, error, eof or exit.
	Type string `json:"type"`
	// start
	Argv  []string `json:"argv,omitempty"`
	Env   []string `json:"env,omitempty"`
	Dir   string   `json:"dir,omitempty"`
	Stdin bool     `json:"stdin,omitempty"`
	// exit
	Code *int `json:"code,omitempty"`
	// error
	Status  int    `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

// Frame tags: the first byte of a binary message on the exec WebSocket.
const (
	TagStdin  byte = 0
	TagStdout byte = 1
	TagStderr byte = 2
)

// MaxFrame is the largest payload of one binary message (the tag byte not
// counted).
const MaxFrame = 64 << 10

// MaxStdin is the most standard input the bridge buffers for one command.
const MaxStdin = 32 << 20

// LabelManaged marks corral's sandboxes.
const LabelManaged = "corral"

// LabelKey carries the sandbox key when the id had to be shortened.
const LabelKey = "corral.key"
