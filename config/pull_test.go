package config_test

import (
	"strings"
	"testing"

	"github.com/d10ffeed/corral/config"
	"github.com/d10ffeed/corral/provider/docker"
	"github.com/d10ffeed/corral/sandbox"
)

// TestDockerPull: provider.docker.pull reaches the provider; a bad value
// is an error naming the key and its line.
func TestDockerPull(t *testing.T) {
	for _, tt := range []struct {
		name, docker string
		want         docker.PullPolicy
	}{
		{"absent is missing", "{image: x}", docker.PullMissing},
		{"missing", "{image: x, pull: missing}", docker.PullMissing},
		{"always", "{image: x, pull: always}", docker.PullAlways},
		{"never", "{image: x, pull: never}", docker.PullNever},
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
			if got := p.PullPolicy(); got != tt.want {
				t.Errorf("PullPolicy() = %q, want %q", got, tt.want)
			}
		})
	}
	for _, tt := range []struct{ name, yaml, line string }{
		{"unknown value", "provider:\n  name: docker\n  docker:\n    image: x\n    pull: IfNotPresent\n", "line 5"},
		{"empty value", "provider:\n  docker:\n    pull: \"\"\n", "line 3"},
		{"not a scalar", "provider:\n  docker:\n    pull: [always]\n", "line 3"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range []string{tt.line, "provider.docker.pull", "missing, always or never"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			t.Logf("%s: %v", tt.name, err)
		})
	}
}
