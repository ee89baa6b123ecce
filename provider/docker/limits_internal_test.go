package docker

import (
	"math"
	"testing"
)

func TestParseLimits(t *testing.T) {
	mem := []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "", want: 0},
		{in: "0", want: Unlimited},
		{in: "unlimited", want: Unlimited},
		{in: " Unlimited ", want: Unlimited},
		{in: "2g", want: 2 << 30},
		{in: "2G", want: 2 << 30},
		{in: "2GiB", want: 2 << 30},
		{in: "2gb", want: 2 << 30},
		{in: "512m", want: 512 << 20},
		{in: "1.5g", want: 3 << 29},
		{in: "1t", want: 1 << 40},
		{in: "8388608", want: 8 << 20},
		{in: "1m", bad: true}, // below the engine's minimum
		{in: "-1g", bad: true},
		{in: "lots", bad: true},
		{in: "0g", bad: true},
		{in: "1e30g", bad: true},
	}
	for _, c := range mem {
		got, err := ParseMemory(c.in)
		if (err != nil) != c.bad || (!c.bad && got != c.want) {
			t.Errorf("ParseMemory(%q) = %d, %v; want %d (bad %v)", c.in, got, err, c.want, c.bad)
		}
	}
	cpus := []struct {
		in   string
		want float64
		bad  bool
	}{
		{in: "", want: 0},
		{in: "0", want: Unlimited},
		{in: "unlimited", want: Unlimited},
		{in: "2", want: 2},
		{in: "0.5", want: 0.5},
		{in: "0.001", bad: true},
		{in: "-1", bad: true},
		{in: "NaN", bad: true},
		{in: "inf", bad: true},
		{in: "two", bad: true},
	}
	for _, c := range cpus {
		got, err := ParseCPUs(c.in)
		if (err != nil) != c.bad || (!c.bad && got != c.want) {
			t.Errorf("ParseCPUs(%q) = %v, %v; want %v (bad %v)", c.in, got, err, c.want, c.bad)
		}
	}
	pids := []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "", want: 0},
		{in: "0", want: Unlimited},
		{in: "-1", want: Unlimited},
		{in: "unlimited", want: Unlimited},
		{in: "100", want: 100},
		{in: "1.5", bad: true},
		{in: "many", bad: true},
	}
	for _, c := range pids {
		got, err := ParsePids(c.in)
		if (err != nil) != c.bad || (!c.bad && got != c.want) {
			t.Errorf("ParsePids(%q) = %d, %v; want %d (bad %v)", c.in, got, err, c.want, c.bad)
		}
	}
}

func TestLimitsOf(t *testing.T) {
	cases := []struct {
		name string
		in   Options
		want Limits
		bad  bool
	}{
		{name: "defaults", in: Options{}, want: Limits{Memory: 2 << 30, CPUs: 2, Pids: 1024}},
		{name: "raised", in: Options{Memory: 8 << 30, CPUs: 4, PidsLimit: 4096}, want: Limits{Memory: 8 << 30, CPUs: 4, Pids: 4096}},
		{name: "unlimited", in: Options{Memory: Unlimited, CPUs: Unlimited, PidsLimit: Unlimited}, want: Limits{}},
		{name: "any negative", in: Options{Memory: -5, CPUs: -0.5, PidsLimit: -7}, want: Limits{}},
		{name: "memory below minimum", in: Options{Memory: 1 << 20}, bad: true},
		{name: "cpus below minimum", in: Options{CPUs: 0.001}, bad: true},
		{name: "cpus NaN", in: Options{CPUs: math.NaN()}, bad: true},
		{name: "cpus Inf", in: Options{CPUs: math.Inf(1)}, bad: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := limitsOf(c.in)
			if (err != nil) != c.bad || (!c.bad && got != c.want) {
				t.Errorf("limitsOf = %+v, %v; want %+v (bad %v)", got, err, c.want, c.bad)
			}
		})
	}
}

func TestLimitsResources(t *testing.T) {
	r, pids := Limits{Memory: 2 << 30, CPUs: 1.5, Pids: 10}.resources()
	if r.Memory != 2<<30 || r.MemorySwap != 2<<30 || r.CPUPeriod != 100_000 || r.CPUQuota != 150_000 || r.NanoCPUs != 0 || pids == nil || *pids != 10 {
		t.Errorf("resources = %+v, pids %v", r, pids)
	}
	r, pids = Limits{}.resources()
	if r.Memory != 0 || r.MemorySwap != 0 || r.CPUQuota != 0 || r.CPUPeriod != 0 || pids != nil {
		t.Errorf("no limits: resources = %+v, pids %v", r, pids)
	}
	if got := (Limits{Memory: 2 << 30, CPUs: 2, Pids: 1024}).String(); got != "memory 2GiB (no swap), cpus 2, pids 1024" {
		t.Errorf("String = %q", got)
	}
	if got := (Limits{}).String(); got != "memory unlimited, cpus unlimited, pids unlimited" {
		t.Errorf("String = %q", got)
	}
	for n, want := range map[int64]string{2 << 30: "2GiB", 1536 << 20: "1536MiB", 100: "100B", 3 << 10: "3KiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
