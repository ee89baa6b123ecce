package registry

import (
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// Decode decodes a provider's corral.yaml section n into v, a pointer to a
// struct with yaml tags, refusing keys the struct does not have. section
// is the key's path for messages ("provider.docker"). Every error names
// the line. A nil n leaves v as it is.
//
// yaml.v3's Node.Decode does not refuse unknown keys, so the keys of the
// mapping are checked against v's fields here (one level: a provider's
// section is flat; nested values are decoded as their types say).
func Decode(n *yaml.Node, section string, v any) error {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: %s: want a mapping of options", n.Line, section)
	}
	known := yamlKeys(reflect.TypeOf(v))
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if !known[k.Value] {
			return fmt.Errorf("line %d: %s: unknown key %q", k.Line, section, k.Value)
		}
	}
	return n.Decode(v)
}

// SectionOf returns an Entry.Section that decodes a provider's corral.yaml
// section strictly (Decode, messages naming section, "provider.docker")
// into a fresh S: the Section func of every provider whose section needs
// no more checks than Decode's.
func SectionOf[S any, PS interface {
	*S
	Config
}](section string) func(*yaml.Node) (Config, error) {
	return func(n *yaml.Node) (Config, error) {
		var s S
		if err := Decode(n, section, &s); err != nil {
			return nil, err
		}
		return PS(&s), nil
	}
}

// yamlKeys returns the yaml keys of a struct type (or pointer to one).
func yamlKeys(t reflect.Type) map[string]bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	keys := map[string]bool{}
	if t.Kind() != reflect.Struct {
		return keys
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = strings.ToLower(f.Name)
		}
		keys[name] = true
	}
	return keys
}
