package qemu_test

import (
	"strings"
	"testing"

	"github.com/d10ffeed/corral/provider/qemu"
	"github.com/d10ffeed/corral/provider/registry"
)

// TestOpenFlags: the provider flags reach the provider through the same
// section the corral.yaml path builds from, and a bad number is refused
// naming its flag.
func TestOpenFlags(t *testing.T) {
	requireQEMU(t)
	e, ok := registry.Lookup(qemu.Name)
	if !ok {
		t.Fatal("qemu is not registered")
	}
	for _, tc := range []struct {
		name    string
		v       registry.Values
		wantErr string
		want    func(qemu.Options) bool
	}{
		{"set", registry.Values{"cpus": "2", "memory": "384", "accel": "tcg", "rootdir": "rel/root"}, "",
			func(o qemu.Options) bool {
				return o.CPUs == 2 && o.MemoryMB == 384 && o.Accel == "tcg" && o.RootDir == "rel/root"
			}},
		{"defaults", registry.Values{}, "",
			func(o qemu.Options) bool { return o.CPUs == qemu.DefaultCPUs && o.MemoryMB == qemu.DefaultMemoryMB }},
		{"zero cpus", registry.Values{"cpus": "0"}, "--cpus: want a positive integer", nil},
		{"bad memory", registry.Values{"memory": "1G"}, "--memory: want a positive integer", nil},
		{"bad accel", registry.Values{"accel": "hvf"}, "accel must be kvm, tcg or empty", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := e.Open(tc.v, registry.OpenOptions{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Open(%v) = %v, want an error with %q", tc.v, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m, ok := p.(qemu.Managed)
			if !ok {
				t.Fatalf("Open returned %T, want qemu.Managed", p)
			}
			if o := qemu.OptionsOf(m.Provider); !tc.want(o) {
				t.Errorf("options %+v", o)
			}
		})
	}
}
