package docker

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/moby/moby/api/types/container"
)

// The default resource limits of every container, applied when the
// corresponding Options field is 0. Raise them in Options (corral.yaml's
// provider.docker section, corral exec --memory/--cpus/--pids), or set
// Unlimited to opt out.
const (
	// DefaultMemory is the default memory limit: 2 GiB, with no swap
	// beyond it.
	DefaultMemory int64 = 2 << 30
	// DefaultCPUs is the default CPU limit: 2 CPUs' worth of time.
	DefaultCPUs = 2.0
	// DefaultPidsLimit is the default cap on processes (and threads) in a
	// container.
	DefaultPidsLimit int64 = 1024
)

// Unlimited, as Options.Memory, Options.CPUs or Options.PidsLimit (any
// negative value works), asks for no limit at all.
const Unlimited = -1

// MinMemory is the smallest memory limit the engine accepts.
const MinMemory int64 = 6 << 20

// cpuPeriod is the CFS period the CPU limit is expressed in (what docker
// run --cpus uses): 100 ms in microseconds.
const cpuPeriod = 100_000

// Limits are the resource limits a provider gives each container. A zero
// field means no limit.
type Limits struct {
	// Memory is the memory limit in bytes. Swap is limited to the same
	// total, so a container cannot escape the limit into swap.
	Memory int64
	// CPUs is how many CPUs' worth of time the container may use,
	// enforced as a CFS quota over a 100 ms period (as docker run --cpus).
	// On an engine with fewer CPUs it has no effect beyond their number.
	CPUs float64
	// Pids caps the number of processes and threads in the container.
	Pids int64
}

// String describes the limits for people, e.g. "memory 2GiB (no swap),
// cpus 2, pids 1024".
func (l Limits) String() string {
	mem, cpus, pids := "unlimited", "unlimited", "unlimited"
	if l.Memory > 0 {
		mem = FormatBytes(l.Memory) + " (no swap)"
	}
	if l.CPUs > 0 {
		cpus = strconv.FormatFloat(l.CPUs, 'f', -1, 64)
	}
	if l.Pids > 0 {
		pids = strconv.FormatInt(l.Pids, 10)
	}
	return "memory " + mem + ", cpus " + cpus + ", pids " + pids
}

// DefaultLimits are the limits of a provider made with zero Options
// fields.
func DefaultLimits() Limits {
	return Limits{Memory: DefaultMemory, CPUs: DefaultCPUs, Pids: DefaultPidsLimit}
}

// Limits returns the limits every container this provider creates gets
// (its Options with the defaults applied).
func (p *Provider) Limits() Limits { return p.limits }

// limitsOf applies the defaults to the options' limits and validates them.
func limitsOf(o Options) (Limits, error) {
	l := DefaultLimits()
	switch {
	case o.Memory < 0:
		l.Memory = 0
	case o.Memory > 0:
		if o.Memory < MinMemory {
			return Limits{}, fmt.Errorf("Options.Memory: %d bytes is below the engine's minimum of 6 MiB", o.Memory)
		}
		l.Memory = o.Memory
	}
	switch {
	case o.CPUs < 0:
		l.CPUs = 0
	case math.IsNaN(o.CPUs) || math.IsInf(o.CPUs, 0):
		return Limits{}, fmt.Errorf("Options.CPUs: %v is not a number of CPUs", o.CPUs)
	case o.CPUs > 0:
		if o.CPUs < 0.01 {
			return Limits{}, fmt.Errorf("Options.CPUs: %v is below the minimum of 0.01", o.CPUs)
		}
		l.CPUs = o.CPUs
	}
	switch {
	case o.PidsLimit < 0:
		l.Pids = 0
	case o.PidsLimit > 0:
		l.Pids = o.PidsLimit
	}
	return l, nil
}

// resources is the container configuration that enforces l.
func (l Limits) resources() (container.Resources, *int64) {
	var r container.Resources
	if l.Memory > 0 {
		r.Memory = l.Memory
		// Memory plus swap may not exceed the memory limit: no swap.
		r.MemorySwap = l.Memory
	}
	if l.CPUs > 0 {
		r.CPUPeriod = cpuPeriod
		r.CPUQuota = int64(math.Round(l.CPUs * cpuPeriod))
	}
	var pids *int64
	if l.Pids > 0 {
		n := l.Pids
		pids = &n
	}
	return r, pids
}

// ParseMemory parses a memory limit as people write it: a number of bytes,
// or a number with a k, m, g or t suffix (powers of 1024; "512m", "2g",
// "1.5GiB"); "0" or "unlimited" is Unlimited; "" is 0, the default.
func ParseMemory(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch t {
	case "":
		return 0, nil
	case "0", "unlimited":
		return Unlimited, nil
	}
	num := strings.TrimSuffix(strings.TrimSuffix(t, "ib"), "b")
	mult := 1.0
	for _, u := range []struct {
		suffix string
		mult   float64
	}{{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"t", 1 << 40}} {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = n, u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || v <= 0 || math.IsInf(v, 0) || v*mult >= math.MaxInt64 {
		return 0, fmt.Errorf("bad memory limit %q (write it like 512m or 2g, or 0 or unlimited for none)", s)
	}
	b := int64(v * mult)
	if b < MinMemory {
		return 0, fmt.Errorf("memory limit %q is below the engine's minimum of 6m", s)
	}
	return b, nil
}

// ParseCPUs parses a CPU limit: a positive number of CPUs (fractions
// allowed, at least 0.01); "0" or "unlimited" is Unlimited; "" is 0, the
// default.
func ParseCPUs(s string) (float64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch t {
	case "":
		return 0, nil
	case "unlimited":
		return Unlimited, nil
	}
	v, err := strconv.ParseFloat(t, 64)
	switch {
	case err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0):
		return 0, fmt.Errorf("bad CPU limit %q (a number of CPUs such as 2 or 0.5, or 0 or unlimited for none)", s)
	case v == 0:
		return Unlimited, nil
	case v < 0.01:
		return 0, fmt.Errorf("CPU limit %q is below the minimum of 0.01", s)
	}
	return v, nil
}

// ParsePids parses a process limit: a positive count; "0", "unlimited" or
// a negative count is Unlimited; "" is 0, the default.
func ParsePids(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch t {
	case "":
		return 0, nil
	case "unlimited":
		return Unlimited, nil
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad process limit %q (a count such as 1024, or 0 or unlimited for none)", s)
	}
	if v <= 0 {
		return Unlimited, nil
	}
	return v, nil
}

// FormatBytes writes a byte count the way ParseMemory reads it back, in
// the largest power-of-1024 unit that keeps it exact ("2GiB", "1536MiB",
// "100B").
func FormatBytes(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
