package journal

// RemountAsIs remounts hc's hierarchy with the options it has.
func RemountAsIs(hc HostCgroup) error { return hc.remount(hc.super) }

// ForgetBornCgroup drops what this process knows of the cgroup it made for
// run token tok, as a daemon started after the one that made it knows
// nothing of it.
func ForgetBornCgroup(tok string) { bornCgroups.take(tok) }
