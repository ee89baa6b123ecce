package sprites

// The Sprites API's JSON (from @fly/sprites 0.1.0 and sprites-go).

// URLSettings is a Sprite's URL access.
type URLSettings struct {
	// Auth is "sprite" (the Bearer token is needed) or "public".
	Auth string `json:"auth,omitempty"`
}

// CreateSprite is POST /v1/sprites.
type CreateSprite struct {
	Name            string       `json:"name"`
	URLSettings     *URLSettings `json:"url_settings,omitempty"`
	Labels          []string     `json:"labels,omitempty"`
	WaitForCapacity bool         `json:"wait_for_capacity,omitempty"`
}

// Sprite is a Sprite as the API returns it.
type Sprite struct {
	ID           string      `json:"id"`
	Name         string      `json:"name"`
	Organization string      `json:"organization"`
	Status       string      `json:"status"`
	URL          string      `json:"url"`
	URLSettings  URLSettings `json:"url_settings"`
	Labels       []string    `json:"labels"`
	CreatedAt    string      `json:"created_at"`
	UpdatedAt    string      `json:"updated_at"`
}

// ListSprites is GET /v1/sprites.
type ListSprites struct {
	Sprites   []Sprite `json:"sprites"`
	HasMore   bool     `json:"has_more"`
	NextToken string   `json:"next_continuation_token"`
}

// Checkpoint is one checkpoint as GET …/checkpoints lists it.
type Checkpoint struct {
	ID         string `json:"id"`
	CreateTime string `json:"create_time"`
	Comment    string `json:"comment,omitempty"`
	IsAuto     bool   `json:"is_auto,omitempty"`
}

// StreamMessage is one NDJSON line of a checkpoint, restore or kill
// stream.
type StreamMessage struct {
	Type     string `json:"type"`
	Data     string `json:"data,omitempty"`
	Error    string `json:"error,omitempty"`
	Message  string `json:"message,omitempty"`
	Signal   string `json:"signal,omitempty"`
	PID      int    `json:"pid,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
}

// Exec frame tags: binary messages start with one (stdin 0, stdout 1,
// stderr 2, exit 3 with the code as the next byte, stdin EOF 4).
const (
	tagStdin    = 0x00
	tagStdout   = 0x01
	tagStderr   = 0x02
	tagExit     = 0x03
	tagStdinEOF = 0x04
)
