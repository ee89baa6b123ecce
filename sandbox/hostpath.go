package sandbox

// HostPather is an optional interface of a Handle whose file system is the
// host's own (the local provider): a path inside the sandbox names a file
// the calling process can open itself, without an exec. Callers use it for
// fast paths only (reading a journal, removing a run's files) and must
// treat what they find there as written by the agent: the agent may
// replace any file with a symbolic link, a FIFO or a huge sparse file.
//
// Reach it through HostPath (or As), never by asserting the Handle's
// dynamic type: handles come wrapped by the guard and its decorators.
type HostPather interface {
	// HostPath maps an absolute sandbox path to the host path of the same
	// file, reporting false when the path has no host equivalent.
	HostPath(sandboxPath string) (string, bool)
}

// HostPath maps an absolute sandbox path to a host path when h (or a handle
// it wraps) is a HostPather, and reports false otherwise.
func HostPath(h Handle, sandboxPath string) (string, bool) {
	var hp HostPather
	if h == nil || !As(h, &hp) {
		return "", false
	}
	return hp.HostPath(sandboxPath)
}
