package sandbox

// A ScriptShell is a Handle with a faster shell for corral's own per-run
// scripts (the journal wrapper): typically a statically linked BusyBox
// built with its standalone shell, whose utilities (mkdir, tail, grep, …)
// run in the shell's own process or as a re-exec of the same static binary,
// with no dynamic loader and no search of PATH. On a host, where each exec
// of a dynamically linked utility costs about a millisecond and a half,
// that is most of a short run's overhead.
//
// Under such a shell a program name without a slash may run one of the
// shell's applets instead of the sandbox's program, so a caller that runs a
// program it does not own (the agent) passes it by the absolute path that
// ResolveProgram returns, and uses the plain "sh" when that fails.
type ScriptShell interface {
	// ScriptShell returns the argv prefix that runs shell text in place of
	// "sh" (for example ["/usr/bin/busybox", "sh"]), or nil when the
	// handle has none.
	ScriptShell() []string
	// ResolveProgram returns the absolute path of the program name would
	// run with the environment overlay env (its PATH, else the sandbox's),
	// or false when there is none.
	ResolveProgram(name string, env map[string]string) (string, bool)
}
