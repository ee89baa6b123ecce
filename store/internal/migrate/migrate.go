// Package migrate loads a store's embedded, versioned schema migrations.
// Each migration is a file named NNNN_description.sql; versions start at 1
// and have no gaps, so a database's version says exactly which ran. The
// stores apply them (each once, in its own transaction, recorded in the
// corral_schema_migrations table) under a lock that serializes processes starting
// at the same time.
package migrate

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one schema change.
type Migration struct {
	Version int    // 1, 2, ...: the order of application
	Name    string // the file name
	SQL     string // the statements, run in one transaction
}

// Load reads the migrations in dir of fsys, in version order.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("migration %q: the name must start with a positive version and '_'", name)
		}
		body, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %q: version %d, want %d (versions start at 1, without gaps or repeats)", m.Name, m.Version, i+1)
		}
	}
	return out, nil
}

// Pending returns the migrations after version current.
func Pending(all []Migration, current int) []Migration {
	if current >= len(all) {
		return nil
	}
	return all[current:]
}
