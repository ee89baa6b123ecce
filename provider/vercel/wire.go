package vercel

import "encoding/json"

// The API's JSON, as @vercel/sandbox 3.x validates it (only the fields
// corral reads).

// Sandbox is a named sandbox.
type Sandbox struct {
	Name             string            `json:"name"`
	Persistent       bool              `json:"persistent"`
	Runtime          string            `json:"runtime,omitempty"`
	Status           string            `json:"status"`
	CurrentSessionID string            `json:"currentSessionId"`
	CreatedAt        int64             `json:"createdAt"`
	Cwd              string            `json:"cwd,omitempty"`
	Tags             map[string]string `json:"tags,omitempty"`
}

// Session is one running (or stopped) VM of a sandbox.
type Session struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Cwd     string `json:"cwd"`
	Timeout int64  `json:"timeout"`
}

// Route is an exposed port.
type Route struct {
	URL       string `json:"url"`
	Subdomain string `json:"subdomain"`
	Port      int    `json:"port"`
}

// SandboxAndSession is the answer of create and get.
type SandboxAndSession struct {
	Sandbox Sandbox `json:"sandbox"`
	Session Session `json:"session"`
	Routes  []Route `json:"routes"`
	Resumed bool    `json:"resumed"`
}

// CreateSandbox is POST /v2/sandboxes.
type CreateSandbox struct {
	ProjectID     string            `json:"projectId"`
	Name          string            `json:"name"`
	Runtime       string            `json:"runtime,omitempty"`
	Ports         []int             `json:"ports"`
	Timeout       int64             `json:"timeout,omitempty"`
	Persistent    bool              `json:"persistent"`
	Tags          map[string]string `json:"tags,omitempty"`
	NetworkPolicy any               `json:"networkPolicy,omitempty"`
	Source        *Source           `json:"source,omitempty"`
	Resources     *Resources        `json:"resources,omitempty"`
}

// Resources is a sandbox's size.
type Resources struct {
	Vcpus int `json:"vcpus"`
}

// Source is what a sandbox starts from.
type Source struct {
	Type       string `json:"type"`
	SnapshotID string `json:"snapshotId,omitempty"`
}

// Command is a command record.
type Command struct {
	ID       string `json:"id"`
	ExitCode *int   `json:"exitCode"`
}

// RunCommand is POST …/cmd.
type RunCommand struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env"`
	Sudo    bool              `json:"sudo"`
	Wait    bool              `json:"wait,omitempty"`
	Logs    bool              `json:"logs,omitempty"`
}

// streamLine is one NDJSON line of a command stream: a command record or
// a log line ({stream, data}; data is an object {code, message} for the
// "error" stream).
type streamLine struct {
	Command *Command        `json:"command"`
	Stream  string          `json:"stream"`
	Data    json.RawMessage `json:"data"`
}

// SnapshotAnswer is POST …/snapshot's answer.
type SnapshotAnswer struct {
	Snapshot struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"snapshot"`
	Session Session `json:"session"`
}

// SandboxPage is GET /v2/sandboxes.
type SandboxPage struct {
	Sandboxes  []Sandbox `json:"sandboxes"`
	Pagination struct {
		Next *string `json:"next"`
	} `json:"pagination"`
}
