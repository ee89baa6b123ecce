package blaxel

// The JSON of Blaxel's control plane and sandbox-api, as @blaxel/core
// 0.3.x sends and reads it (only the fields corral uses).

// Sandbox is a sandbox record (GET/POST /sandboxes).
type Sandbox struct {
	Metadata Metadata `json:"metadata"`
	Spec     Spec     `json:"spec"`
	Status   string   `json:"status,omitempty"`
	State    string   `json:"state,omitempty"`
}

// Metadata names a resource; URL is the sandbox's own API.
type Metadata struct {
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels,omitempty"`
	URL       string            `json:"url,omitempty"`
	CreatedAt string            `json:"createdAt,omitempty"`
}

// Spec is a sandbox's configuration.
type Spec struct {
	Region  string   `json:"region,omitempty"`
	Runtime *Runtime `json:"runtime,omitempty"`
}

// Runtime is what the sandbox runs.
type Runtime struct {
	Image      string `json:"image,omitempty"`
	Memory     int    `json:"memory,omitempty"`
	Envs       []Env  `json:"envs"`
	Generation string `json:"generation,omitempty"`
	TTL        string `json:"ttl,omitempty"`
}

// Env is one environment variable of a sandbox's configuration.
type Env struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// ProcessRequest is POST /process on the sandbox-api.
type ProcessRequest struct {
	Command           string            `json:"command"`
	Env               map[string]string `json:"env,omitempty"`
	Name              string            `json:"name,omitempty"`
	WorkingDir        string            `json:"workingDir,omitempty"`
	WaitForCompletion bool              `json:"waitForCompletion"`
}

// ProcessResponse is a process record.
type ProcessResponse struct {
	Name     string `json:"name"`
	PID      string `json:"pid"`
	Status   string `json:"status"`
	ExitCode int    `json:"exitCode"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

// streamEvent is one NDJSON line of POST /process under Accept:
// text/event-stream.
type streamEvent struct {
	Type string `json:"type"`
	Data string `json:"data"`
}

// Preview is a sandbox port's public URL.
type Preview struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Port   int    `json:"port"`
		Public bool   `json:"public"`
		URL    string `json:"url"`
		TTL    string `json:"ttl,omitempty"`
	} `json:"spec"`
}

// PreviewToken is a private preview's token.
type PreviewToken struct {
	Spec struct {
		Token     string `json:"token"`
		ExpiresAt string `json:"expiresAt"`
	} `json:"spec"`
}

// PreviewTokenHeader carries a private preview's token.
const PreviewTokenHeader = "X-Blaxel-Preview-Token"
