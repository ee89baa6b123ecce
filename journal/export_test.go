package journal

// Test hooks.
var (
	CgroupV2Root = cgroupV2Root
	OwnCgroup    = ownCgroup
)
