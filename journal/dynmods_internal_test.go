//go:build linux

package journal

import (
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseMountinfoLine(t *testing.T) {
	const point = "/sys/fs/cgroup/unified"
	tests := []struct {
		name, line, point string
		ok, favor         bool
		flags             uintptr
		super             []string
	}{
		{"hybrid", "36 25 0:30 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate", point,
			true, false, syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC | syscall.MS_RELATIME, []string{"nsdelegate"}},
		{"favored", "36 25 0:30 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate,favordynmods,memory_recursiveprot", point,
			true, true, syscall.MS_RELATIME, []string{"nsdelegate", "favordynmods", "memory_recursiveprot"}},
		{"no optional fields, read-only", "40 1 0:33 / /cg ro - cgroup2 none ro", "/cg", true, false, syscall.MS_RDONLY, nil},
		{"escaped point", `40 1 0:33 / /a\040b rw,noatime master:3 - cgroup2 none rw`, "/a b", true, false, syscall.MS_NOATIME, nil},
		{"v1 hierarchy", "30 25 0:26 / /sys/fs/cgroup/unified rw - cgroup cgroup rw,pids", point, false, false, 0, nil},
		{"another point", "36 25 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw", point, false, false, 0, nil},
		{"no separator", "36 25 0:30 / /sys/fs/cgroup/unified rw cgroup2 cgroup2 rw", point, false, false, 0, nil},
		{"short", "36 - cgroup2", point, false, false, 0, nil},
		{"empty", "", point, false, false, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hc, ok := parseMountinfoLine(tc.line, tc.point)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			if hc.Mount != tc.point || hc.FavorDynMods != tc.favor || hc.mountFlags != tc.flags {
				t.Errorf("got mount %q favor %v flags %#x, want %q %v %#x", hc.Mount, hc.FavorDynMods, hc.mountFlags, tc.point, tc.favor, tc.flags)
			}
			if diff := cmp.Diff(tc.super, hc.super); diff != "" {
				t.Errorf("super options (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseMountinfoLine(f *testing.F) {
	f.Add("36 25 0:30 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate", "/sys/fs/cgroup/unified")
	f.Add(`40 1 0:33 / /a\040b\ ro - cgroup2 none ro`, "/a b")
	f.Add(" - - - ", "")
	f.Fuzz(func(t *testing.T, line, point string) {
		hc, ok := parseMountinfoLine(line, point)
		if !ok {
			return
		}
		if hc.Mount != point {
			t.Fatalf("mount %q, want %q", hc.Mount, point)
		}
		for _, o := range hc.super {
			if o == "" || o == "rw" || o == "ro" || strings.Contains(o, ",") {
				t.Fatalf("super option %q kept", o)
			}
		}
	})
}

func TestWithFavor(t *testing.T) {
	tests := []struct {
		super []string
		on    bool
		want  []string
	}{
		{nil, true, []string{"favordynmods"}},
		{[]string{"nsdelegate"}, true, []string{"nsdelegate", "favordynmods"}},
		{[]string{"favordynmods", "nsdelegate"}, true, []string{"nsdelegate", "favordynmods"}},
		{[]string{"nsdelegate", "favordynmods", "memory_recursiveprot"}, false, []string{"nsdelegate", "memory_recursiveprot"}},
		{nil, false, []string{}},
	}
	for _, tc := range tests {
		in := slices.Clone(tc.super)
		got := withFavor(tc.super, tc.on)
		if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("withFavor(%q, %v) (-want +got):\n%s", tc.super, tc.on, diff)
		}
		if !slices.Equal(in, tc.super) {
			t.Errorf("withFavor changed its argument: %q, was %q", tc.super, in)
		}
	}
}
