package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
)

// cgroupLimits prints the memory limit, the memory+swap (v1) or swap (v2)
// limit and the CPU quota of the container it runs in.
const cgroupLimits = `if [ -f /sys/fs/cgroup/memory.max ]; then
	cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory.swap.max; cut -d' ' -f1 /sys/fs/cgroup/cpu.max
else
	cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes /sys/fs/cgroup/cpu/cpu.cfs_quota_us
fi
cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max`

// TestExecDockerLimits: corral exec gives a Docker sandbox the default
// limits, --memory/--cpus/--pids change them, 0 and unlimited remove
// them, and an allocation past --memory is killed.
func TestExecDockerLimits(t *testing.T) {
	testutil.NeedDocker(t)
	run := func(args ...string) []string {
		t.Helper()
		argv := append([]string{"exec", "--provider", "docker", "--image", testutil.DockerTestImage}, args...)
		argv = append(argv, "--", "sh", "-c", cgroupLimits)
		out, errOut, code := corral(t, argv...)
		if code != 0 {
			t.Fatalf("corral %s: exit %d: %s", strings.Join(argv, " "), code, errOut)
		}
		return strings.Fields(out)
	}
	v2 := func(f []string) bool { return f[1] == "0" } // cgroup v2 shows swap alone
	for _, tt := range []struct {
		name  string
		flags []string
		mem   string
		quota string
		pids  string
	}{
		{"defaults", nil, "2147483648", "200000", "1024"},
		{"set", []string{"--memory", "512m", "--cpus", "0.5", "--pids", "100"}, "536870912", "50000", "100"},
	} {
		f := run(tt.flags...)
		t.Logf("%s: kernel limits %v", tt.name, f)
		swap := tt.mem // v1: memory+swap equals memory
		if v2(f) {
			swap = "0"
		}
		if len(f) != 4 || f[0] != tt.mem || f[1] != swap || f[2] != tt.quota || f[3] != tt.pids {
			t.Errorf("%s: kernel limits %v, want memory %s swap %s quota %s pids %s", tt.name, f, tt.mem, swap, tt.quota, tt.pids)
		}
	}
	for _, none := range []string{"0", "unlimited"} {
		f := run("--memory", none, "--cpus", none, "--pids", none)
		t.Logf("--memory/--cpus/--pids %s: kernel limits %v", none, f)
		if len(f) != 4 || (f[0] != "max" && len(f[0]) < 16) || (f[2] != "-1" && f[2] != "max") || f[3] != "max" {
			t.Errorf("%s: kernel limits %v, want none", none, f)
		}
	}

	// The attack: two processes holding 150 MiB each under --memory 128m.
	out, errOut, code := corral(t, "exec", "--provider", "docker", "--image", testutil.DockerTestImage, "--memory", "128m", "--",
		"sh", "-c", `set -o pipefail; dd if=/dev/zero bs="$1"M count=1 2>/dev/null | dd bs="$1"M count=1 iflag=fullblock of=/dev/null 2>/dev/null`, "sh", "150")
	t.Logf("--memory 128m, holding 300 MiB: exit %d", code)
	if code == 0 {
		t.Errorf("holding 300 MiB under --memory 128m succeeded: %q %q", out, errOut)
	}
}

func TestLimitFlagErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"bad memory", []string{"exec", "--provider", "docker", "--image", "x", "--memory", "lots", "--", "true"}, "--memory: bad memory limit"},
		{"tiny memory", []string{"exec", "--provider", "docker", "--image", "x", "--memory", "1m", "--", "true"}, "--memory: memory limit"},
		{"bad cpus", []string{"exec", "--provider", "docker", "--image", "x", "--cpus", "-2", "--", "true"}, "--cpus: bad CPU limit"},
		{"bad pids", []string{"exec", "--provider", "docker", "--image", "x", "--pids", "many", "--", "true"}, "--pids: bad process limit"},
		{"local", []string{"exec", "--memory", "1g", "--", "true"}, `--memory: these flags are for the docker or qemu or sbx provider, not "local"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, code := corral(t, tt.args...)
			if code != execFailure || !strings.Contains(errOut, tt.want) || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, out, errOut, execFailure, tt.want)
			}
		})
	}
}

// TestProvidersLimits: corral providers reports each provider's default
// limits, in text and JSON; the local provider reports none.
func TestProvidersLimits(t *testing.T) {
	out, errOut, code := corral(t, "providers", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rows []struct {
		Name   string `json:"name"`
		Limits struct {
			Enforced    bool     `json:"enforced"`
			MemoryBytes *int64   `json:"memoryBytes"`
			CPUs        *float64 `json:"cpus"`
			Pids        *int64   `json:"pids"`
			Note        string   `json:"note"`
		} `json:"limits"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	seen := 0
	for _, r := range rows {
		l := r.Limits
		switch r.Name {
		case "docker":
			seen++
			if !l.Enforced || l.MemoryBytes == nil || *l.MemoryBytes != 2<<30 || l.CPUs == nil || *l.CPUs != 2 || l.Pids == nil || *l.Pids != 1024 {
				t.Errorf("docker limits %+v, want enforced 2 GiB, 2 CPUs, 1024 pids", l)
			}
		case "local":
			seen++
			if l.Enforced || l.MemoryBytes != nil || l.CPUs != nil || l.Pids != nil || !strings.Contains(l.Note, "no resource limits") {
				t.Errorf("local limits %+v, want none", l)
			}
		}
	}
	if seen != 2 {
		t.Errorf("docker and local not both in %s", out)
	}
	text, _, code := corral(t, "providers")
	if code != 0 || !strings.Contains(text, "LIMITS") || !strings.Contains(text, "memory 2GiB (no swap), cpus 2, pids 1024") {
		t.Errorf("providers text:\n%s", text)
	}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "local ") && !strings.Contains(line, " none ") {
			t.Errorf("local line does not say none: %q", line)
		}
	}
}
