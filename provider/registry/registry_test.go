package registry_test

import (
	"context"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// fake is a provider registered only by this test: adding a provider is
// its own package's Register call, nothing else.
type fake struct{ sandbox.Provider }

func (fake) Name() string { return "fake" }

type fakeSection struct {
	Region string `yaml:"region"`
	Size   int    `yaml:"size"`
}

func (s *fakeSection) Provider(registry.BuildOptions) (sandbox.Provider, error) { return fake{}, nil }

func init() {
	registry.Register(registry.Entry{
		Name:         "fake",
		Summary:      "a provider registered by a test",
		Capabilities: func() sandbox.Capabilities { return sandbox.Capabilities{Exec: true} },
		Section:      registry.SectionOf[fakeSection]("provider.fake"),
		Flags:        []registry.Flag{{Name: "region", Usage: "the region"}},
		Open:         func(registry.Values, registry.OpenOptions) (sandbox.Provider, error) { return fake{}, nil },
	})
	registry.Register(registry.Entry{
		Name:         "other",
		Capabilities: func() sandbox.Capabilities { return sandbox.Capabilities{} },
		Section:      func(*yaml.Node) (registry.Config, error) { return nil, nil },
		Flags:        []registry.Flag{{Name: "region", Usage: "where"}, {Name: "token-file", Usage: "a file"}},
		Open:         func(registry.Values, registry.OpenOptions) (sandbox.Provider, error) { return fake{}, nil },
	})
}

func TestRegisteredProviderIsListedWithItsFlags(t *testing.T) {
	if got := strings.Join(registry.Names(), ","); got != "fake,other" {
		t.Errorf("Names() = %s", got)
	}
	flags := registry.AllFlags()
	if len(flags) != 2 || flags[0].Name != "region" || flags[0].Usage != "fake: the region; other: where" || flags[1].Name != "token-file" {
		t.Errorf("AllFlags() = %+v", flags)
	}
	if _, err := registry.Open("fake", registry.Values{"region": "eu"}, registry.OpenOptions{}); err != nil {
		t.Errorf("open with its own flag: %v", err)
	}
}

func TestOpenRefusesUnknownProviderAndForeignFlags(t *testing.T) {
	_, err := registry.Open("nope", nil, registry.OpenOptions{})
	if sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), `unknown provider "nope" (known: fake, other)`) {
		t.Errorf("unknown provider: %v", err)
	}
	_, err = registry.Open("fake", registry.Values{"token-file": "/x"}, registry.OpenOptions{})
	t.Logf("foreign flag: %v", err)
	if sandbox.CodeOf(err) != sandbox.InvalidArgument || !strings.Contains(err.Error(), `--token-file: these flags are for the other provider, not "fake"`) {
		t.Errorf("foreign flag: %v", err)
	}
}

func TestRegisterPanicsOnDuplicatesAndBadFlags(t *testing.T) {
	ok := registry.Entry{
		Capabilities: func() sandbox.Capabilities { return sandbox.Capabilities{} },
		Section:      func(*yaml.Node) (registry.Config, error) { return nil, nil },
		Open:         func(registry.Values, registry.OpenOptions) (sandbox.Provider, error) { return nil, nil },
	}
	for _, tc := range []struct {
		name string
		e    func() registry.Entry
	}{
		{"duplicate name", func() registry.Entry { e := ok; e.Name = "fake"; return e }},
		{"no name", func() registry.Entry { return ok }},
		{"no open", func() registry.Entry { e := ok; e.Name = "x1"; e.Open = nil; return e }},
		{"flag named provider", func() registry.Entry {
			e := ok
			e.Name, e.Flags = "x2", []registry.Flag{{Name: "provider"}}
			return e
		}},
		{"repeated flag", func() registry.Entry {
			e := ok
			e.Name, e.Flags = "x3", []registry.Flag{{Name: "a"}, {Name: "a"}}
			return e
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			registry.Register(tc.e())
		})
	}
}

func TestDecodeRefusesUnknownKeysWithTheLine(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"unknown key", "region: eu\nsize: 2\nregoin: us\n", `line 3: provider.fake: unknown key "regoin"`},
		{"not a mapping", "eu\n", "line 1: provider.fake: want a mapping"},
		{"bad type", "size: big\n", "line 1: cannot unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n yaml.Node
			if err := yaml.Unmarshal([]byte(tc.doc), &n); err != nil {
				t.Fatal(err)
			}
			e, _ := registry.Lookup("fake")
			_, err := e.Section(n.Content[0])
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	e, _ := registry.Lookup("fake")
	c, err := e.Section(nil)
	if err != nil || c == nil {
		t.Errorf("absent section: %v %v", c, err)
	}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte("region: eu\nsize: 2\n"), &n); err != nil {
		t.Fatal(err)
	}
	c, err = e.Section(n.Content[0])
	if s, ok := c.(*fakeSection); err != nil || !ok || *s != (fakeSection{Region: "eu", Size: 2}) {
		t.Errorf("a good section decodes to %#v, %v", c, err)
	}
}

type lister struct{ fake }

func (lister) ListSandboxes(context.Context) ([]registry.Sandbox, error) { return nil, nil }

func TestAsNamesTheProviderAndTheMissingOperation(t *testing.T) {
	if _, err := registry.As[registry.Lister](lister{}, "listing sandboxes"); err != nil {
		t.Errorf("a lister: %v", err)
	}
	_, err := registry.As[registry.Pruner](fake{}, "pruning")
	t.Logf("missing operation: %v", err)
	if sandbox.CodeOf(err) != sandbox.Unimplemented || !strings.Contains(err.Error(), "the fake provider does not implement pruning") {
		t.Errorf("err = %v", err)
	}
}

func TestLimitsString(t *testing.T) {
	if got := (registry.Limits{Text: "memory 1GiB"}).String(); got != "none" {
		t.Errorf("unenforced: %q", got)
	}
	if got := (registry.Limits{Enforced: true, Text: "memory 1GiB"}).String(); got != "memory 1GiB" {
		t.Errorf("enforced: %q", got)
	}
}

// TestOpenAndBuildGuard: every provider the registry hands out is guarded
// once (Open and Build, the path config takes), and the management
// interfaces are still found through the guard.
func TestOpenAndBuildGuard(t *testing.T) {
	opened, err := registry.Open("fake", registry.Values{}, registry.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	built, err := registry.Build(&fakeSection{}, registry.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]sandbox.Provider{"Open": opened, "Build": built} {
		w, ok := p.(sandbox.ProviderWrapper)
		if !ok {
			t.Errorf("%s returned %T, not a guarded provider", name, p)
			continue
		}
		if _, ok := w.Unwrap().(fake); !ok {
			t.Errorf("%s: the guard wraps %T, want the provider itself (one guard)", name, w.Unwrap())
		}
		// The fake has no Create at all (a nil embedded Provider): a bad
		// env name must be refused by the guard before reaching it.
		_, err := p.Create(context.Background(), sandbox.CreateOptions{Env: map[string]string{"A=B": "x"}})
		if sandbox.CodeOf(err) != sandbox.InvalidArgument {
			t.Errorf("%s: create with env name A=B: %v, want InvalidArgument from the guard", name, err)
		}
	}
	g := sandbox.Guard(sandbox.Guard(lister{}, sandbox.GuardOptions{}), sandbox.GuardOptions{})
	if _, err := registry.As[registry.Lister](g, "listing sandboxes"); err != nil {
		t.Errorf("a guarded lister: %v", err)
	}
	if _, err := registry.As[registry.Pruner](g, "pruning"); sandbox.CodeOf(err) != sandbox.Unimplemented {
		t.Errorf("a guarded non-pruner: %v, want Unimplemented", err)
	}
}
