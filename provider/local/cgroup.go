package local

import (
	"log/slog"
	"sync"

	"github.com/d10ffeed/corral/journal"
)

// A local run's wrapper makes the run's cgroup beside the daemon's own and
// moves the agent into it. On a hierarchy mounted without favordynmods
// that move waits for an RCU grace period whenever the host made no cgroup
// migration in the last grace period or two: 13–20 ms on the two-core
// machines measured, on the path of every run that follows a pause (a
// chat's next command), against 0.1 ms when runs come back to back.
// journal.HostCgroup describes it; Options.FavorDynMods sets the option.

// cgroupChecked makes New look at the host's hierarchy once per process
// (and remount once), however many providers a process makes.
var cgroupChecked struct {
	sync.Mutex
	hinted, remounted bool
}

// checkCgroup logs a hint when the hierarchy lacks favordynmods, or with
// favor sets it. Only a caller that gave a logger is told (New with the
// zero Options, as the registry's capability listing calls it, looks at
// nothing unless asked to remount).
func checkCgroup(favor bool, log *slog.Logger) {
	if !favor && log == nil {
		return
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cgroupChecked.Lock()
	defer cgroupChecked.Unlock()
	if cgroupChecked.remounted || (!favor && cgroupChecked.hinted) {
		return
	}
	hc, err := journal.LookHostCgroup()
	if err != nil || hc.Mount == "" || hc.FavorDynMods {
		return
	}
	if !favor {
		cgroupChecked.hinted = true
		log.Info("local: the cgroup v2 hierarchy is mounted without favordynmods: a run that follows a pause waits 13-20 ms for the kernel to move its agent into the run's cgroup; set the local provider's favorDynMods (host-wide, root) or mount -o remount,favordynmods "+hc.Mount, "mount", hc.Mount)
		return
	}
	cgroupChecked.remounted = true // tried once, whatever the outcome
	if err := hc.EnableFavorDynMods(); err != nil {
		log.Warn("local: could not remount the cgroup v2 hierarchy with favordynmods; runs after a pause start 13-20 ms later", "mount", hc.Mount, "err", err)
		return
	}
	log.Info("local: remounted the cgroup v2 hierarchy with favordynmods (host-wide)", "mount", hc.Mount)
}
