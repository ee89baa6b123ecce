// Package journal keeps a run's output as a file inside its sandbox, so
// the run outlives the process that started it.
//
// The agent's stdout is redirected (never piped: a dead reader must not
// kill it with SIGPIPE) and appended (never truncated) to
// <dir>/<token>.ndjson, its stderr to <dir>/<token>.err. Any process can
// read the journal from any byte offset (follow or poll), probe for the
// exit, or kill the agent — all through the sandbox contract's exec and
// spawn, with every value passed as a positional parameter, never spliced
// into shell text. Where the sandbox's files are the host's
// (sandbox.HostPather), the Reader reads the journal file itself and
// Remove deletes it with os calls: no process (the Host strategy).
//
// # The journal
//
// The wrapper writes, in this order:
//
//  1. the start line {"__start":PID,"__t":STARTTIME}: the wrapper's pid and
//     its start time (field 22 of /proc/PID/stat; 0 where there is no
//     /proc). Journals written before the start time was recorded begin
//     with {"__start":PID}; they are read alike, without the end line rule
//     below;
//  2. the agent's stdout, byte for byte;
//  3. once the agent and its processes are gone: a newline, then the end
//     line {"__end":"NONCE","__nl":1}. The newline ends an unterminated
//     last line of the agent; after output that ended with a newline it
//     makes an empty line, which readers drop: an empty line is held back
//     until the next line, and dropped when that is this run's end line
//     with "__nl":1 (so an agent's empty line reaches the caller once a
//     line follows it). An older wrapper wrote the newline only after an
//     unterminated line and an end line {"__end":"NONCE"}; before such a
//     line the empty line is the agent's and is delivered;
//  4. in a git work tree, the diff line
//     {"__diff":"BASE64","__truncated":BOOL,"__nonce":"NONCE"};
//  5. the exit sentinel {"__exit":CODE,"__nonce":"NONCE"}, its last write
//     before it exits.
//
// NONCE is a per-run random value kept on the run record and given to the
// wrapper on its stdin (or in a variable it unsets): never in argv, never
// in the agent's environment.
//
// # What counts as the exit
//
// The nonce alone does not authenticate anything: the agent runs as the
// wrapper's child under the same uid and can read it from the wrapper's
// memory. Readers (Reader and Probe alike) therefore apply these rules:
//
//   - A line that contains this run's nonce is never delivered as output.
//     It is a candidate: an end line, a diff line or an exit sentinel if it
//     parses as one, else nothing.
//   - An exit sentinel is the run's exit only when it is the journal's last
//     line (the journal ends just past its newline) at a time the wrapper
//     is known to be gone. The wrapper's liveness is read before the
//     journal's size, so everything the wrapper wrote is already in the
//     journal when it is found gone. A sentinel followed by any byte, or
//     one read while the wrapper runs and then followed by more, is forged
//     and dropped; reading goes on.
//   - A diff line counts only when it is immediately followed by the exit
//     and immediately preceded by the end line (in journals of the older
//     form, which have no end line: only followed by the exit). Any other
//     diff line is forged and dropped.
//   - The wrapper is a process whose argv is this journal's wrapper's
//     (see aliveFn): the one the start line names, if its start time
//     matches and it is not a zombie, or else any such process; it is gone
//     when there is none. A reused pid is not the wrapper; a rewritten
//     start line can neither make a running wrapper look gone nor make
//     another process pass for it. A reader told by the process that
//     spawned the wrapper that it exited (Reader.Exited, from StartWatch:
//     the provider's Process.Wait returned) takes it as gone without that
//     look.
//
// Guaranteed: an agent that knows the nonce and writes anything to its
// output — or rewrites the journal — while its wrapper runs cannot end its
// run early, choose the exit code corral records, or add a diff; the
// forged lines do not reach the caller.
//
// Not guaranteed:
//   - the agent can signal its wrapper (same uid): one that SIGKILLs it and
//     then appends a sentinel-shaped line with the nonce ends the run with
//     the code it wrote. Closing that needs a wrapper the agent cannot
//     signal (another uid or pid namespace).
//   - an agent that can write its wrapper's memory (ptrace, /proc/PID/mem)
//     controls what the wrapper writes. Where the kernel's Yama
//     ptrace_scope is 1 or more, a child can neither read nor write its
//     parent's memory, and the nonce stays secret.
//   - a process of the run that outlives the wrapper and writes to the
//     journal after the sentinel makes the sentinel not the last line: the
//     run reads as lost (or, with the nonce, as whatever exit it wrote
//     last). The wrapper kills the run's process scope before it writes the
//     end line (see scope.go), so only a process that escaped the scope
//     can (on a host without a cgroup for the run: one that cleared its
//     environment and left its session; with Spec.KeepBackground: any
//     process kept).
//   - without /proc the wrapper is known by its pid alone, which may be
//     reused.
package journal

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
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
// record: it marks the wrapper's own lines (see the package doc for what
// it does and does not prove).
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

// StartRecord is what the journal's start line records about the wrapper.
type StartRecord struct {
	PID int
	// StartTime is field 22 of the wrapper's /proc/PID/stat (clock ticks
	// after boot), 0 where it could not be read.
	StartTime uint64
	// Current is false for a start line of the older form, without a start
	// time; such journals have no end line.
	Current bool
}

// ParseStart reports whether line is the journal's start line and returns
// the wrapper's pid. It accepts both forms (see the package doc).
func ParseStart(line []byte) (int, bool) {
	st, ok := ParseStartLine(line)
	return st.PID, ok
}

// ParseStartLine parses the journal's start line, in either form:
// {"__start":PID,"__t":STARTTIME} or, in older journals, {"__start":PID}.
func ParseStartLine(line []byte) (StartRecord, bool) {
	var s struct {
		Start *int    `json:"__start"`
		T     *uint64 `json:"__t"`
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' || !bytes.HasPrefix(line, []byte(`{"__start":`)) {
		return StartRecord{}, false
	}
	if err := json.Unmarshal(line, &s); err != nil || s.Start == nil || *s.Start <= 0 {
		return StartRecord{}, false
	}
	st := StartRecord{PID: *s.Start}
	if s.T != nil {
		st.StartTime, st.Current = *s.T, true
	}
	return st, true
}

// EndLine returns the end line (with its newline) as the wrapper writes it
// once the agent is gone, after a newline of its own (endLine). Tests and
// fakes use it.
func EndLine(nonce string) []byte {
	return []byte(`{"__end":"` + nonce + `","__nl":1}` + "\n")
}

// ParseEnd reports whether line (without its newline) is this run's end
// line, in either form: {"__end":NONCE,"__nl":1} or, from older wrappers,
// {"__end":NONCE}.
func ParseEnd(line []byte, nonce string) bool {
	ok, _ := parseEnd(line, nonce)
	return ok
}

// parseEnd is ParseEnd that also says whether the wrapper wrote a newline
// of its own before the end line whatever the agent's last byte ("__nl":1;
// an older wrapper wrote one only after an unterminated last line).
func parseEnd(line []byte, nonce string) (ok, nl bool) {
	line = bytes.TrimSpace(line)
	if nonce == "" || !bytes.HasPrefix(line, []byte(`{"__end":`)) {
		return false, false
	}
	var e struct {
		End *string `json:"__end"`
		NL  int     `json:"__nl"`
	}
	if json.Unmarshal(line, &e) != nil || e.End == nil || *e.End != nonce {
		return false, false
	}
	return true, e.NL == 1
}

// FindExit reports whether data (the tail of a journal) ends with this
// run's exit sentinel as its last line, and returns the exit code. That is
// necessary for the exit, not sufficient: the wrapper must also be gone
// (see the package doc).
func FindExit(data []byte, nonce string) (int, bool) {
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return 0, false
	}
	last := data[:len(data)-1]
	if i := bytes.LastIndexByte(last, '\n'); i >= 0 {
		last = last[i+1:]
	}
	return ParseSentinel(last, nonce)
}

// DiffLine returns a diff line (with its newline) as the wrapper writes
// it. Tests and fakes use it.
func DiffLine(patch []byte, truncated bool, nonce string) []byte {
	return []byte(`{"__diff":"` + base64.StdEncoding.EncodeToString(patch) + `","__truncated":` + strconv.FormatBool(truncated) + `,"__nonce":"` + nonce + `"}` + "\n")
}

// ParseDiff reports whether line has the form of this run's working-tree
// diff line (where it counts is in the package doc), and returns the diff (a git patch,
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
