package harness

// WarmKeeperFiles is what a keeper directory records, each file's first
// line as the shell's read -r gives it (surrounding blanks trimmed).
type WarmKeeperFiles struct {
	// PID is the keeper's pid (0 when the file is missing or not a number).
	PID int
	// PIDAlive reports whether that process exists and is not a zombie.
	PIDAlive bool
	// Busy is the busy file's content ("" when there is none), BusyAlive
	// whether the pid it names is alive.
	Busy      string
	BusyAlive bool
	// Digest and Session are the digest and session files' contents.
	Digest, Session string
	// LogSize is the size of the session log (the file "log"), -1 when it
	// is missing or not a regular file.
	LogSize int64
}
