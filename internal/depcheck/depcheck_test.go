// Package depcheck holds the test of corral's dependency rules: the
// contract packages import no provider, database driver, SDK or HTTP
// framework, and config imports no provider. A failure names the offending
// import and the chain of imports that reaches it.
package depcheck

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/d10ffeed/corral"

// contract lists the contract packages. Their dependencies (transitively)
// may only be the standard library, minus the packages below, and other
// contract packages.
var contract = []string{"sandbox", "journal", "run", "store", "event", "harness"}

// forbiddenStd are standard packages a contract package may not reach: a
// contract speaks through interfaces, never over the wire itself.
var forbiddenStd = []string{"net/http", "database/sql"}

// contractDep reports whether corral package p may be a dependency of a
// contract package: the contract packages and what lives under them (their
// helpers, never an implementation).
func contractDep(p string) bool {
	rel := strings.TrimPrefix(p, module+"/")
	switch rel {
	case "store", "event", "harness":
		return true
	}
	for _, root := range []string{"sandbox", "journal", "run", "store/internal"} {
		if rel == root || strings.HasPrefix(rel, root+"/") {
			return true
		}
	}
	return false
}

type pkg struct {
	ImportPath string
	Standard   bool
	Imports    []string
}

// deps returns the packages that pattern depends on (itself included),
// keyed by import path, as the go command sees them.
func deps(t *testing.T, pattern string) map[string]pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-json", pattern).Output()
	if err != nil {
		var ee *exec.ExitError
		if ok := asExit(err, &ee); ok {
			t.Fatalf("go list %s: %v\n%s", pattern, err, ee.Stderr)
		}
		t.Fatalf("go list %s: %v", pattern, err)
	}
	all := map[string]pkg{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		all[p.ImportPath] = p
	}
	return all
}

func asExit(err error, target **exec.ExitError) bool {
	ee, ok := err.(*exec.ExitError)
	if ok {
		*target = ee
	}
	return ok
}

// chain returns the import path from root to target, for the message.
func chain(all map[string]pkg, root, target string) string {
	prev := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == target {
			var path []string
			for q := p; q != ""; q = prev[q] {
				path = append([]string{strings.TrimPrefix(q, module+"/")}, path...)
			}
			return strings.Join(path, " → ")
		}
		for _, imp := range all[p].Imports {
			if _, seen := prev[imp]; !seen {
				prev[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return target
}

// violations lists the offending dependencies of root under the rule bad:
// each edge from an allowed package to a refused one, once, with the chain
// of imports from root (what lies beyond a refused package is not listed).
func violations(t *testing.T, root string, bad func(pkg) string) []string {
	t.Helper()
	all := deps(t, root)
	var out []string
	seen := map[string]bool{}
	for path, p := range all {
		if bad(p) != "" {
			continue
		}
		for _, imp := range p.Imports {
			why := bad(all[imp])
			if why == "" || seen[imp] {
				continue
			}
			seen[imp] = true
			out = append(out, why+": "+chain(all, root, path)+" → "+imp)
		}
	}
	sort.Strings(out)
	return out
}

func contractRule(p pkg) string {
	switch {
	case p.Standard || p.ImportPath == "C":
		for _, f := range forbiddenStd {
			if p.ImportPath == f {
				return "a contract package reaches " + f
			}
		}
		return ""
	case strings.HasPrefix(p.ImportPath, module+"/"):
		if contractDep(p.ImportPath) {
			return ""
		}
		return "a contract package imports a non-contract corral package"
	}
	return "a contract package imports a third-party module (provider SDK, driver or framework)"
}

func TestContractPackagesImportNoImplementation(t *testing.T) {
	for _, c := range contract {
		t.Run(c, func(t *testing.T) {
			for _, v := range violations(t, module+"/"+c, contractRule) {
				t.Error(v)
			}
		})
	}
}

func TestRuleCatchesAProviderImport(t *testing.T) {
	// The rule itself, on made-up packages: a provider, a driver, a
	// framework and net/http are refused; the standard library and the
	// contract's own helpers pass.
	for _, tc := range []struct {
		p    pkg
		want bool
	}{
		{pkg{ImportPath: module + "/provider/docker"}, false},
		{pkg{ImportPath: module + "/store/sqlitestore"}, false},
		{pkg{ImportPath: "github.com/jackc/pgx/v5"}, false},
		{pkg{ImportPath: "net/http", Standard: true}, false},
		{pkg{ImportPath: "strings", Standard: true}, true},
		{pkg{ImportPath: module + "/sandbox/execfs"}, true},
		{pkg{ImportPath: module + "/store/internal/lease"}, true},
	} {
		if got := contractRule(tc.p) == ""; got != tc.want {
			t.Errorf("%s: allowed=%v, want %v", tc.p.ImportPath, got, tc.want)
		}
	}
}

// registry is the one provider package config may import: the providers
// register themselves with it, and a binary links them.
const registry = module + "/provider/registry"

// configRule refuses every provider package but the registry.
func configRule(p pkg) string {
	if strings.HasPrefix(p.ImportPath, module+"/provider/") && p.ImportPath != registry {
		return "config imports a provider (it may only import provider/registry)"
	}
	return ""
}

func TestConfigImportsNoProvider(t *testing.T) {
	all := deps(t, module+"/config")
	if _, ok := all[registry]; !ok {
		t.Errorf("config does not reach %s: the rule below would pass vacuously", registry)
	}
	for _, v := range violations(t, module+"/config", configRule) {
		t.Error(v)
	}
}

func TestConfigRuleCatchesAProviderImport(t *testing.T) {
	for _, tc := range []struct {
		p    pkg
		want bool
	}{
		{pkg{ImportPath: module + "/provider/docker"}, false},
		{pkg{ImportPath: module + "/provider/local"}, false},
		{pkg{ImportPath: module + "/provider/cloudhttp"}, false},
		{pkg{ImportPath: registry}, true},
		{pkg{ImportPath: module + "/sandbox"}, true},
		{pkg{ImportPath: "gopkg.in/yaml.v3"}, true},
	} {
		if got := configRule(tc.p) == ""; got != tc.want {
			t.Errorf("%s: allowed=%v, want %v", tc.p.ImportPath, got, tc.want)
		}
	}
}
