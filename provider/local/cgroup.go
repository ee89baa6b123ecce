package local

import (
	"log/slog"
	"sync"

	"github.com/d10ffeed/corral/journal"
)

// A local run's wrapper is started in the run's cgroup (journal's
// spawnWrapper, through SpawnInCgroup), so a run moves no process between
// cgroups when its agent leaves nothing behind. The moves that remain (a
// cancel moves the wrapper out before it kills the cgroup; so does the
// wrapper when the agent left processes behind; a kernel before 5.7, which
// cannot start a process in a cgroup, makes the wrapper join it) wait, on a
// hierarchy mounted without favordynmods, for an RCU grace period whenever
// the host made no move in the last few tens of milliseconds: 13–20 ms on
// the two-core machines measured. journal.HostCgroup describes the
// hierarchy; Options.FavorDynMods sets the option.

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
		log.Info("local: the cgroup v2 hierarchy is mounted without favordynmods: a cancel, and the end of a run whose agent left processes behind, wait 13-20 ms for the kernel to move the wrapper out of the run's cgroup after a quiet spell; set the local provider's favorDynMods (host-wide, root) or mount -o remount,favordynmods "+hc.Mount, "mount", hc.Mount)
		return
	}
	cgroupChecked.remounted = true // tried once, whatever the outcome
	if err := hc.EnableFavorDynMods(); err != nil {
		log.Warn("local: could not remount the cgroup v2 hierarchy with favordynmods; cgroup moves after a quiet spell wait 13-20 ms", "mount", hc.Mount, "err", err)
		return
	}
	log.Info("local: remounted the cgroup v2 hierarchy with favordynmods (host-wide)", "mount", hc.Mount)
}
