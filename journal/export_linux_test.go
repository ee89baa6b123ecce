package journal

// RemountAsIs remounts hc's hierarchy with the options it has.
func RemountAsIs(hc HostCgroup) error { return hc.remount(hc.super) }
