package upstashbox

// The wire types of Upstash Box's REST API (@upstash/box 0.5.5,
// dist/client.js and dist/types.d.ts) and of its exec session WebSocket.

// HeaderAPIKey carries the API key on every request and upgrade.
const HeaderAPIKey = "X-Box-Api-Key"

// Box states (BoxStatus).
const (
	StatusCreating = "creating"
	StatusIdle     = "idle"
	StatusRunning  = "running"
	StatusPaused   = "paused"
	StatusError    = "error"
	StatusDeleted  = "deleted"
)

// Box is BoxData: what create, get and list answer.
type Box struct {
	ID            string         `json:"id"`
	Name          string         `json:"name,omitempty"`
	Labels        []string       `json:"labels,omitempty"`
	Size          string         `json:"size,omitempty"`
	KeepAlive     bool           `json:"keep_alive,omitempty"`
	Runtime       string         `json:"runtime,omitempty"`
	Status        string         `json:"status"`
	NetworkPolicy *NetworkPolicy `json:"network_policy,omitempty"`
	CreatedAt     int64          `json:"created_at"`
	UpdatedAt     int64          `json:"updated_at"`
}

// NetworkPolicy is a box's network access policy.
type NetworkPolicy struct {
	Mode           string   `json:"mode"`
	AllowedDomains []string `json:"allowed_domains,omitempty"`
	AllowedCIDRs   []string `json:"allowed_cidrs,omitempty"`
	DeniedCIDRs    []string `json:"denied_cidrs,omitempty"`
}

// CreateBox is POST /v2/box's body (and, with SnapshotID, POST
// /v2/box/from-snapshot's).
type CreateBox struct {
	SnapshotID    string            `json:"snapshot_id,omitempty"`
	Name          string            `json:"name,omitempty"`
	Labels        []string          `json:"labels,omitempty"`
	Size          string            `json:"size,omitempty"`
	KeepAlive     bool              `json:"keep_alive,omitempty"`
	Runtime       string            `json:"runtime,omitempty"`
	Env           map[string]string `json:"env_vars,omitempty"`
	NetworkPolicy *NetworkPolicy    `json:"network_policy,omitempty"`
}

// StatusAnswer is GET /v2/box/{id}/status's answer.
type StatusAnswer struct {
	Status string `json:"status"`
}

// ExecRequest is POST /v2/box/{id}/exec's (and exec-stream's) body: no
// cwd but folder, no environment.
type ExecRequest struct {
	Command []string `json:"command"`
	Folder  string   `json:"folder,omitempty"`
}

// ExecResult is POST /v2/box/{id}/exec's answer.
type ExecResult struct {
	Output   string `json:"output"`
	Error    string `json:"error,omitempty"`
	ExitCode int    `json:"exit_code"`
}

// FileContent is files/read's answer.
type FileContent struct {
	Content string `json:"content"`
}

// WriteFile is files/write's body.
type WriteFile struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding,omitempty"`
}

// FileEntry is one entry of files/list's {"files": [...]}.
type FileEntry struct {
	Name    string `json:"name"`
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	IsDir   bool   `json:"is_dir"`
	ModTime string `json:"mod_time"`
}

// FileList is files/list's answer.
type FileList struct {
	Files []FileEntry `json:"files"`
}

// Snapshot is a box snapshot.
type Snapshot struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	BoxID     string `json:"box_id"`
	SizeBytes int64  `json:"size_bytes"`
	Status    string `json:"status"`
	CreatedAt int64  `json:"created_at"`
}

// SnapshotList is GET /v2/box/{id}/snapshots's answer.
type SnapshotList struct {
	Snapshots []Snapshot `json:"snapshots"`
}

// PreviewRequest is POST /v2/box/{id}/preview's body.
type PreviewRequest struct {
	Port        int  `json:"port"`
	BearerToken bool `json:"bearer_token,omitempty"`
	BasicAuth   bool `json:"basic_auth,omitempty"`
}

// Preview is a public URL of a port (PublicURL).
type Preview struct {
	URL      string `json:"url"`
	Port     int    `json:"port"`
	Token    string `json:"token,omitempty"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
}

// ErrorBody is every error answer: the SDK reads "error".
type ErrorBody struct {
	Error string `json:"error"`
}

// SessionPath is the exec session WebSocket under /v2/box/{id}: the
// official Python SDK's (upstash_box/_exec_session.py); the pinned
// TypeScript SDK (0.5.5) has no session.
const SessionPath = "/exec-session"

// Frame is one JSON text frame of the exec session.
//
//	client → server: start{argv|cmd, cwd, env, tty}, stdin{data}, stdin_close,
//	                 signal{signal}, terminate{graceMs}
//	server → client: started{pid, execId}, stdout{data}, stderr{data},
//	                 exit{code}, error{message}
//
// data is base64. The Python SDK sends TERM, KILL, INT, HUP, TSTP, QUIT,
// USR1 and USR2 (the fake delivers the first four; others become TERM).
// Dropping the socket kills the command; it cannot be re-attached.
type Frame struct {
	Type    string   `json:"type"`
	Argv    []string `json:"argv,omitempty"`
	Cmd     string   `json:"cmd,omitempty"`
	Cwd     string   `json:"cwd,omitempty"`
	Env     []string `json:"env,omitempty"`
	TTY     bool     `json:"tty,omitempty"`
	Data    string   `json:"data,omitempty"`
	Signal  string   `json:"signal,omitempty"`
	GraceMs int      `json:"graceMs,omitempty"`
	PID     int      `json:"pid,omitempty"`
	ExecID  string   `json:"execId,omitempty"`
	Code    *int     `json:"code,omitempty"`
	Message string   `json:"message,omitempty"`
}

// MaxSessionStream is how much of one stream a session forwards; past
// it the command gets TERM.
const MaxSessionStream = 8 << 20
