package local

import (
	"context"
	"os"
	"path/filepath"
	"sort"

	"github.com/d10ffeed/corral/provider/registry"
	"github.com/d10ffeed/corral/sandbox"
)

// Section is corral.yaml's provider.local section, as the registry decodes
// it. Relative paths are relative to the config file's directory.
//
//	provider:
//	  name: local
//	  local: {baseDir: .corral/sandboxes, scrubEnv: [ANTHROPIC_API_KEY], favorDynMods: true}
type Section struct {
	Dir      string   `yaml:"dir"`
	BaseDir  string   `yaml:"baseDir"`
	ScrubEnv []string `yaml:"scrubEnv"`
	// FavorDynMods is Options.FavorDynMods.
	FavorDynMods bool `yaml:"favorDynMods"`
}

// Provider builds the local provider the section describes.
func (s *Section) Provider(o registry.BuildOptions) (sandbox.Provider, error) {
	return New(Options{Dir: o.RelPath(s.Dir), BaseDir: o.RelPath(s.BaseDir), ScrubEnv: append(append([]string(nil), s.ScrubEnv...), o.ScrubEnv...), FavorDynMods: s.FavorDynMods, Logger: o.Logger})
}

func init() {
	registry.Register(registry.Entry{
		Name:    Name,
		Summary: "host processes in a directory (no isolation)",
		Capabilities: func() sandbox.Capabilities {
			p, _ := New(Options{})
			return p.Capabilities()
		},
		Limits: func() registry.Limits {
			return registry.Limits{Note: "no isolation and no resource limits: commands may use all the memory, CPU and processes the host gives the user"}
		},
		Section: registry.SectionOf[Section]("provider.local"),
		Flags: []registry.Flag{
			{Name: "dir", Usage: "use this existing directory as the sandbox (kept afterwards)"},
			{Name: "base-dir", Usage: "the directory that holds new sandboxes' directories (default $TMPDIR/corral-sandboxes)"},
		},
		Open: func(v registry.Values, o registry.OpenOptions) (sandbox.Provider, error) {
			return New(Options{Dir: v["dir"], BaseDir: v["base-dir"], Logger: o.Logger})
		},
	})
}

var _ registry.Lister = (*Provider)(nil)

// ListSandboxes lists the sandbox directories under the base directory,
// newest first (a directory's modification time stands for its creation
// time). A fixed Options.Dir is not listed; a missing base directory is an
// empty list.
func (p *Provider) ListSandboxes(ctx context.Context) ([]registry.Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, sandbox.Wrap(sandbox.Canceled, "local.list", p.baseDir, err)
	}
	ents, err := os.ReadDir(p.baseDir)
	if os.IsNotExist(err) {
		return []registry.Sandbox{}, nil
	}
	if err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, "local.list", p.baseDir, err)
	}
	out := []registry.Sandbox{}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, registry.Sandbox{ID: filepath.Join(p.baseDir, e.Name()), State: "directory", CreatedAt: fi.ModTime().UTC()})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out, nil
}
