package sbxfake

import (
	"fmt"
	"strings"
)

// flags holds parsed flag values in order (repeatable flags keep all).
type flags map[string][]string

func (f flags) has(n string) bool { _, ok := f[n]; return ok }

func (f flags) get(n string) string {
	if v := f[n]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

func (f flags) first(names ...string) string {
	for _, n := range names {
		if v := f.get(n); v != "" {
			return v
		}
	}
	return ""
}

// parseFlags parses args as cobra/pflag would: spec maps each flag name
// (long, or one letter for a short flag) to whether it takes a value.
// With interspersed, flags may follow positional arguments; without it
// (docker exec's layout) the first positional argument ends the flags.
// "--" ends the flags too. Short boolean flags combine (-it).
func parseFlags(args []string, spec map[string]bool, interspersed bool) (flags, []string, error) {
	fl := flags{}
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return fl, append(pos, args[i+1:]...), nil
		case strings.HasPrefix(a, "--"):
			name, val, hasVal := strings.Cut(a[2:], "=")
			takes, ok := spec[name]
			if !ok || len(name) == 1 {
				return nil, nil, fmt.Errorf("unknown flag: --%s", name)
			}
			if takes && !hasVal {
				if i+1 >= len(args) {
					return nil, nil, fmt.Errorf("flag needs an argument: --%s", name)
				}
				i++
				val = args[i]
			}
			if !takes && hasVal {
				val = strings.ToLower(val)
				if val != "true" && val != "false" {
					return nil, nil, fmt.Errorf("invalid argument %q for \"--%s\" flag", val, name)
				}
				if val == "false" {
					continue
				}
			}
			fl[name] = append(fl[name], val)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			shorts := a[1:]
			for j := 0; j < len(shorts); j++ {
				name := string(shorts[j])
				takes, ok := spec[name]
				if !ok {
					return nil, nil, fmt.Errorf("unknown shorthand flag: '%s' in %s", name, a)
				}
				if !takes {
					fl[name] = append(fl[name], "")
					continue
				}
				val := shorts[j+1:]
				val = strings.TrimPrefix(val, "=")
				if val == "" {
					if i+1 >= len(args) {
						return nil, nil, fmt.Errorf("flag needs an argument: '%s' in %s", name, a)
					}
					i++
					val = args[i]
				}
				fl[name] = append(fl[name], val)
				break
			}
		default:
			if !interspersed {
				return fl, append(pos, args[i:]...), nil
			}
			pos = append(pos, a)
		}
	}
	return fl, pos, nil
}
