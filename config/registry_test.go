package config_test

import (
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/d10ffeed/corral/config"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// cloudSection is the section of a provider config knows nothing about:
// it registers here, as a new provider does from its own package.
type cloudSection struct {
	Region string `yaml:"region"`
	dir    string
}

// Provider builds a local provider, in the directory the section's
// relative path resolved to, so the test can see what config handed over.
func (s *cloudSection) Provider(o registry.BuildOptions) (sandbox.Provider, error) {
	s.dir = o.RelPath("here")
	return local.New(local.Options{})
}

var lastCloud *cloudSection

func init() {
	registry.Register(registry.Entry{
		Name:         "cloud",
		Capabilities: func() sandbox.Capabilities { return sandbox.Capabilities{} },
		Section: func(n *yaml.Node) (registry.Config, error) {
			s := &cloudSection{}
			lastCloud = s
			return s, registry.Decode(n, "provider.cloud", s)
		},
		Open: func(registry.Values, registry.OpenOptions) (sandbox.Provider, error) {
			return local.New(local.Options{})
		},
	})
}

// TestRegisteredProviderSection: a provider registered outside config gets
// its corral.yaml section decoded (strictly, with lines) and builds the
// definition's provider; config needs no change for it.
func TestRegisteredProviderSection(t *testing.T) {
	f, err := config.Parse([]byte("provider:\n  name: cloud\n  cloud: {region: eu-1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Definition(config.BuildOptions{}); err != nil {
		t.Fatal(err)
	}
	if lastCloud.Region != "eu-1" || lastCloud.dir != "here" {
		t.Errorf("section %+v", lastCloud)
	}
	_, err = config.Parse([]byte("provider:\n  name: cloud\n  cloud:\n    zone: x\n"))
	if err == nil || !strings.Contains(err.Error(), `line 4: provider.cloud: unknown key "zone"`) {
		t.Errorf("unknown key: %v", err)
	}
	if got := strings.Join(config.ProviderNames(), ","); got != "cloud,docker,local" {
		t.Errorf("ProviderNames() = %s", got)
	}
}

// TestDefinitionProviderIsGuarded: the provider config builds from a
// corral.yaml section comes through the registry's guard, and the
// provider's own type is reached with sandbox.ProviderAs.
func TestDefinitionProviderIsGuarded(t *testing.T) {
	for _, src := range []string{"provider:\n  name: cloud\n", "provider:\n  name: local\n", ""} {
		f, err := config.Parse([]byte(src))
		if err != nil {
			t.Fatal(err)
		}
		def, err := f.Definition(config.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := def.Provider.(sandbox.ProviderWrapper); !ok {
			t.Errorf("%q: the definition's provider is %T, not guarded", src, def.Provider)
		}
		var lp *local.Provider
		if !sandbox.ProviderAs(def.Provider, &lp) {
			t.Errorf("%q: ProviderAs(*local.Provider) failed through the guard", src)
		}
	}
}
