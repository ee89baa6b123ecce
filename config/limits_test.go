package config_test

import (
	"testing"

	"github.com/d10ffeed/corral/config"
	"github.com/d10ffeed/corral/provider/docker"
	"github.com/d10ffeed/corral/sandbox"
)

// TestDockerLimits: corral.yaml's docker section reaches the provider's
// limits; absent keys keep the defaults, 0 and "unlimited" remove a limit.
func TestDockerLimits(t *testing.T) {
	for _, tt := range []struct {
		name, docker string
		want         docker.Limits
	}{
		{"defaults", "{image: x}", docker.DefaultLimits()},
		{"raised", "{image: x, memory: 8g, cpus: 4, pidsLimit: 4096}", docker.Limits{Memory: 8 << 30, CPUs: 4, Pids: 4096}},
		{"lowered", "{image: x, memory: 512MiB, cpus: 0.5, pidsLimit: 64}", docker.Limits{Memory: 512 << 20, CPUs: 0.5, Pids: 64}},
		{"zero is none", "{image: x, memory: 0, cpus: 0, pidsLimit: 0}", docker.Limits{}},
		{"unlimited", "{image: x, memory: unlimited, cpus: unlimited, pidsLimit: unlimited}", docker.Limits{}},
		{"one opted out", "{image: x, memory: unlimited}", docker.Limits{CPUs: docker.DefaultCPUs, Pids: docker.DefaultPidsLimit}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := config.Parse([]byte("provider:\n  name: docker\n  docker: " + tt.docker + "\n"))
			if err != nil {
				t.Fatal(err)
			}
			def, err := f.Definition(config.BuildOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var p *docker.Provider
			if !sandbox.ProviderAs(def.Provider, &p) {
				t.Fatalf("provider is %T", def.Provider)
			}
			defer p.Close()
			if got := p.Limits(); got != tt.want {
				t.Errorf("Limits() = %+v, want %+v", got, tt.want)
			}
		})
	}
}
