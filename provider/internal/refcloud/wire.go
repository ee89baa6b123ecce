package refcloud

import "time"

// Sandbox is the protocol's sandbox object.
type Sandbox struct {
	// ID is the backend's opaque id (the handle's ID).
	ID string `json:"id"`
	// Name is the create's name, unique while the sandbox lives.
	Name string `json:"name"`
	// Labels are the create's labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Root is the workspace's absolute path in the sandbox.
	Root string `json:"root"`
	// CreatedAt is when the backend made it.
	CreatedAt time.Time `json:"createdAt"`
}

// CreateRequest is the body of POST /v1/sandboxes. It has no environment:
// secrets never reach create-time configuration.
type CreateRequest struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

// ListResponse is the answer of GET /v1/sandboxes.
type ListResponse struct {
	Sandboxes []Sandbox `json:"sandboxes"`
}

// ProcessStatus is the answer of GET /v1/sandboxes/{id}/processes/{pid}.
type ProcessStatus struct {
	PID      int  `json:"pid"`
	Running  bool `json:"running"`
	ExitCode *int `json:"exitCode,omitempty"`
}

// SignalRequest is the body of POST …/processes/{pid}/signal.
type SignalRequest struct {
	Signal int `json:"signal"`
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
	// started
	PID int `json:"pid,omitempty"`
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

// MaxFrame is the largest payload of one binary message (the tag byte
// not counted): both sides read messages of up to 1 MiB.
const MaxFrame = 64 << 10

// LabelManaged marks corral's sandboxes.
const LabelManaged = "corral"
