package docker_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/docker"
	"github.com/d10ffeed/corral/sandbox"
)

// allocScript makes two processes hold mib MiB each at the same time: the
// first dd keeps its buffer until the second has read all of it, so the
// peak is 2×mib whatever the scheduling. It prints the pipeline's status.
const allocScript = `set -o pipefail
dd if=/dev/zero bs="$1"M count=1 2>/dev/null | dd bs="$1"M count=1 iflag=fullblock of=/dev/null 2>/dev/null
echo "$?"`

// alloc runs allocScript for 2×mib MiB and returns its exit status.
func alloc(t *testing.T, h sandbox.Handle, mib int) int {
	t.Helper()
	res, err := h.Exec(context.Background(), sandbox.Command{Args: []string{"sh", "-c", allocScript, "sh", strconv.Itoa(mib)}})
	if err != nil {
		t.Fatalf("allocating 2×%d MiB: %v", mib, err)
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		t.Fatalf("allocating 2×%d MiB: output %q, stderr %q", mib, res.Stdout, res.Stderr)
	}
	return code
}

// cgroupScript prints the memory limit, the memory+swap (v1) or swap (v2)
// limit and the CPU quota the kernel holds for the container, one a line.
const cgroupScript = `if [ -f /sys/fs/cgroup/memory.max ]; then
	cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory.swap.max
	cut -d' ' -f1 /sys/fs/cgroup/cpu.max
else
	cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us
fi`

// kernelLimits reads what the kernel enforces for the container: memory,
// swap (as memory+swap on cgroup v1, swap alone on v2) and CPU quota.
func kernelLimits(t *testing.T, h sandbox.Handle) (mem, swap, quota string, v2 bool) {
	t.Helper()
	lines := strings.Fields(sh(t, h, cgroupScript))
	if len(lines) != 3 {
		t.Fatalf("cgroup limits: %q", lines)
	}
	v2 = strings.TrimSpace(sh(t, h, `[ -f /sys/fs/cgroup/memory.max ] && echo v2 || echo v1`)) == "v2"
	return lines[0], lines[1], lines[2], v2
}

func inspect(t *testing.T, h sandbox.Handle) *container.HostConfig {
	t.Helper()
	res, err := apiClient(t).ContainerInspect(context.Background(), containerID(t, h), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Container.HostConfig
}

// TestLimitsByDefault is the attack of issue 11 item 4 against a provider
// made with no limit options: 3 GiB held at once (2×1500 MiB) must not
// succeed, 200 MiB must; the engine and the kernel must hold the default
// memory (no swap), CPU and process limits.
func TestLimitsByDefault(t *testing.T) {
	p := newProvider(t, docker.Options{})
	if got, want := p.Limits(), docker.DefaultLimits(); got != want {
		t.Errorf("Limits() = %+v, want the defaults %+v", got, want)
	}
	h := testutil.Create(t, p, sandbox.CreateOptions{})

	hc := inspect(t, h)
	if hc.Memory != docker.DefaultMemory || hc.MemorySwap != docker.DefaultMemory {
		t.Errorf("inspect: Memory %d MemorySwap %d, want both %d (no swap)", hc.Memory, hc.MemorySwap, docker.DefaultMemory)
	}
	if hc.CPUPeriod != 100_000 || hc.CPUQuota != 200_000 || hc.NanoCPUs != 0 {
		t.Errorf("inspect: CpuPeriod %d CpuQuota %d NanoCpus %d, want 100000/200000/0 (2 CPUs)", hc.CPUPeriod, hc.CPUQuota, hc.NanoCPUs)
	}
	if hc.PidsLimit == nil || *hc.PidsLimit != docker.DefaultPidsLimit {
		t.Errorf("inspect: PidsLimit %v, want %d", hc.PidsLimit, docker.DefaultPidsLimit)
	}
	mem, swap, quota, v2 := kernelLimits(t, h)
	wantSwap := strconv.FormatInt(docker.DefaultMemory, 10) // v1: memory+swap
	if v2 {
		wantSwap = "0"
	}
	if mem != strconv.FormatInt(docker.DefaultMemory, 10) || swap != wantSwap || quota != "200000" {
		t.Errorf("kernel: memory %s, swap %s, cpu quota %s; want %d, %s, 200000", mem, swap, quota, docker.DefaultMemory, wantSwap)
	}

	big := alloc(t, h, 1500)
	small := alloc(t, h, 100)
	t.Logf("default limits (%v): holding 3000 MiB exited %d, holding 200 MiB exited %d; kernel memory limit %s, swap %s, cpu quota %s/100000",
		p.Limits(), big, small, mem, swap, quota)
	if big == 0 {
		t.Errorf("holding 3000 MiB succeeded under the default %s limit", docker.FormatBytes(docker.DefaultMemory))
	}
	if small != 0 {
		t.Errorf("holding 200 MiB failed (exit %d) under the default limit", small)
	}
}

// TestLimitsConfigured lowers every limit and then opts out of all of
// them: the engine, the kernel and an allocation follow the options.
func TestLimitsConfigured(t *testing.T) {
	t.Run("lowered", func(t *testing.T) {
		p := newProvider(t, docker.Options{Memory: 64 << 20, CPUs: 0.5, PidsLimit: 64})
		h := testutil.Create(t, p, sandbox.CreateOptions{})
		hc := inspect(t, h)
		if hc.Memory != 64<<20 || hc.MemorySwap != 64<<20 || hc.CPUQuota != 50_000 || hc.CPUPeriod != 100_000 || hc.PidsLimit == nil || *hc.PidsLimit != 64 {
			t.Errorf("inspect: Memory %d MemorySwap %d CpuQuota %d/%d PidsLimit %v", hc.Memory, hc.MemorySwap, hc.CPUQuota, hc.CPUPeriod, hc.PidsLimit)
		}
		big, small := alloc(t, h, 100), alloc(t, h, 16)
		// A process bomb meets the process limit: of 200 background
		// sleeps, at most 64 processes exist at once.
		// The subshell exits when a fork fails; the count and the kill
		// use builtins only.
		out := sh(t, h, `( i=0; while [ $i -lt 200 ]; do sleep 600 >/dev/null 2>&1 & i=$((i+1)); done ) 2>/dev/null
set -- /proc/[0-9]*
n=$#
trap '' TERM
kill 0
echo "$n"`)
		procs, err := strconv.Atoi(strings.TrimSpace(out))
		if err != nil {
			t.Fatalf("process count %q", out)
		}
		t.Logf("limits %v: holding 200 MiB exited %d, holding 32 MiB exited %d; 200 background sleeps left %d processes in the container", p.Limits(), big, small, procs)
		if big == 0 || small != 0 {
			t.Errorf("under a 64 MiB limit: 200 MiB exited %d (want non-zero), 32 MiB exited %d (want 0)", big, small)
		}
		if procs > 64 {
			t.Errorf("%d processes under a limit of 64", procs)
		}
	})
	t.Run("unlimited", func(t *testing.T) {
		p := newProvider(t, docker.Options{Memory: docker.Unlimited, CPUs: docker.Unlimited, PidsLimit: docker.Unlimited})
		if got := p.Limits(); got != (docker.Limits{}) {
			t.Errorf("Limits() = %+v, want none", got)
		}
		h := testutil.Create(t, p, sandbox.CreateOptions{})
		hc := inspect(t, h)
		if hc.Memory != 0 || hc.MemorySwap > 0 || hc.CPUQuota != 0 || hc.NanoCPUs != 0 || (hc.PidsLimit != nil && *hc.PidsLimit > 0) {
			t.Errorf("inspect: Memory %d MemorySwap %d CpuQuota %d NanoCpus %d PidsLimit %v, want no limits", hc.Memory, hc.MemorySwap, hc.CPUQuota, hc.NanoCPUs, hc.PidsLimit)
		}
		mem, _, quota, _ := kernelLimits(t, h)
		if n, err := strconv.ParseInt(mem, 10, 64); (err != nil || n < 1<<50) && mem != "max" {
			t.Errorf("kernel memory limit %s, want none", mem)
		}
		if quota != "-1" && quota != "max" {
			t.Errorf("kernel cpu quota %s, want none", quota)
		}
		t.Logf("unlimited: kernel memory limit %s, cpu quota %s", mem, quota)
	})
}

// TestLimitsInvalid: limits the engine would refuse are refused by New.
func TestLimitsInvalid(t *testing.T) {
	for _, o := range []docker.Options{{Memory: 1 << 20}, {CPUs: 0.001}} {
		_, err := docker.New(o)
		wantCode(t, fmt.Sprintf("New(%+v)", o), err, sandbox.InvalidArgument)
	}
}
