// Package journal keeps a run's output as a file inside its sandbox, so
// the run outlives the process that started it.
//
// The agent's stdout is redirected (never piped: a dead reader must not
// kill it with SIGPIPE) and appended (never truncated) to
// <dir>/<token>.ndjson, its stderr to <dir>/<token>.err. The journal's first
// line records the wrapper's pid; its last line is an exit sentinel carrying
// the agent's exit code and a per-run random nonce that the agent never
// sees, so it cannot forge its own exit. Any process can read the journal
// from any byte offset (follow or poll), probe for the exit, or kill the
// agent — all through the sandbox contract's exec and spawn, with every
// value passed as a positional parameter, never spliced into shell text.
package journal

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"path"
	"regexp"
	"strconv"

	"github.com/d10ffeed/corral/sandbox"
)

// DefaultDir is where journals live inside a sandbox.
const DefaultDir = "/tmp/corral-runs"

// Paths are a run's journal files inside the sandbox.
type Paths struct {
	Dir     string // the journal directory
	Token   string // the run id's file token
	Journal string // <Dir>/<Token>.ndjson: stdout and the sentinels
	Err     string // <Dir>/<Token>.err: stderr
	In      string // <Dir>/<Token>.in: the agent's stdin, where it cannot be written to the process
	Files   string // <Dir>/<Token>.d: the run's private files (agent config with secrets); removed with the journal
}

// PathsFor returns the paths of a run's journal under dir (DefaultDir when
// empty).
func PathsFor(dir, runID string) (Paths, error) {
	if dir == "" {
		dir = DefaultDir
	}
	dir = path.Clean(dir)
	if !path.IsAbs(dir) {
		return Paths{}, sandbox.Errorf(sandbox.InvalidArgument, "journal", dir, "the journal directory must be absolute")
	}
	tok, err := Token(runID)
	if err != nil {
		return Paths{}, sandbox.Wrap(sandbox.InvalidArgument, "journal", runID, err)
	}
	return Paths{Dir: dir, Token: tok, Journal: path.Join(dir, tok+".ndjson"), Err: path.Join(dir, tok+".err"), In: path.Join(dir, tok+".in"), Files: path.Join(dir, tok+".d")}, nil
}

// NewNonce returns a fresh random nonce (32 hex digits). Keep it on the run
// record: it is what tells a real exit sentinel from a forged one.
func NewNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var nonceRE = regexp.MustCompile(`^[0-9a-f]{32}$`)

// ValidNonce reports whether n has the form NewNonce returns.
func ValidNonce(n string) bool { return nonceRE.MatchString(n) }

// SentinelLine returns the exit sentinel line (with its newline) as the
// wrapper writes it. Tests and fakes use it.
func SentinelLine(code int, nonce string) []byte {
	return []byte(`{"__exit":` + strconv.Itoa(code) + `,"__nonce":"` + nonce + `"}` + "\n")
}

// ParseSentinel reports whether line (without its newline) is this run's
// exit sentinel and returns the exit code. It fails closed: anything but a
// JSON object with an integer __exit and exactly this nonce is not a
// sentinel.
func ParseSentinel(line []byte, nonce string) (int, bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' || !bytes.Contains(line, []byte(`"__exit"`)) {
		return 0, false
	}
	var s struct {
		Exit  json.RawMessage `json:"__exit"`
		Nonce *string         `json:"__nonce"`
	}
	if err := json.Unmarshal(line, &s); err != nil || s.Nonce == nil || *s.Nonce != nonce || nonce == "" {
		return 0, false
	}
	// An integer literal only: not a string, not a fraction, not 1e2.
	code, err := strconv.Atoi(string(s.Exit))
	if err != nil {
		return 0, false
	}
	return code, true
}

// ParseStart reports whether line is the journal's start line and returns
// the wrapper's pid.
func ParseStart(line []byte) (int, bool) {
	var s struct {
		Start *int `json:"__start"`
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' || !bytes.HasPrefix(line, []byte(`{"__start":`)) {
		return 0, false
	}
	if err := json.Unmarshal(line, &s); err != nil || s.Start == nil {
		return 0, false
	}
	return *s.Start, true
}

// FindExit scans data (the tail of a journal) from the end for this run's
// exit sentinel; the wrapper writes the real one last.
func FindExit(data []byte, nonce string) (int, bool) {
	lines := bytes.Split(data, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if code, ok := ParseSentinel(lines[i], nonce); ok {
			return code, true
		}
	}
	return 0, false
}

// ParseDiff reports whether line is this run's working-tree diff, written
// by the wrapper after the agent exited, and returns the diff (a git patch,
// cut at MaxDiff bytes) and whether it was cut.
func ParseDiff(line []byte, nonce string) (diff []byte, truncated bool, ok bool) {
	line = bytes.TrimSpace(line)
	if !bytes.HasPrefix(line, []byte(`{"__diff":`)) {
		return nil, false, false
	}
	var d struct {
		Diff      *string `json:"__diff"`
		Truncated bool    `json:"__truncated"`
		Nonce     string  `json:"__nonce"`
	}
	if err := json.Unmarshal(line, &d); err != nil || d.Diff == nil || d.Nonce != nonce || nonce == "" {
		return nil, false, false
	}
	b, err := decodeBase64([]byte(*d.Diff))
	if err != nil {
		return nil, false, false
	}
	return b, d.Truncated, true
}

// MaxDiff bounds the diff a journal carries.
const MaxDiff = 1 << 20
