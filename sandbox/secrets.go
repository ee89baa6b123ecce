package sandbox

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
)

// Secrets holds resolved secret values by name. The values can reach only a
// provider's environment (at create, resume and restore), a command's
// environment and the git credential helper: never argv, a sandbox key, a
// store row, an event, a log line, a snapshot or a journal.
//
// Secrets prints, marshals and logs as its names only, so a stray %v or a
// slog attribute cannot leak a value. The zero value is empty and usable.
type Secrets struct {
	m       map[string]string
	brokers map[string]Broker // brokered secrets: never in Env (see Broker)
}

// NewSecrets returns Secrets holding a copy of values (name → value). Names
// must be valid environment variable names; they are what commands see.
func NewSecrets(values map[string]string) (Secrets, error) {
	m := make(map[string]string, len(values))
	for k, v := range values {
		if err := ValidateEnvName(k); err != nil {
			return Secrets{}, err
		}
		m[k] = v
	}
	return Secrets{m: m}, nil
}

// Len returns the number of secrets.
func (s Secrets) Len() int { return len(s.m) }

// Names returns the secrets' names, sorted.
func (s Secrets) Names() []string {
	names := make([]string, 0, len(s.m))
	for k := range s.m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// Value returns the named secret's value.
func (s Secrets) Value(name string) (string, bool) {
	v, ok := s.m[name]
	return v, ok
}

// Env returns a copy of the secrets as environment variables, for a
// provider's CreateOptions.Env or Handle.SetEnv. Brokered secrets are left
// out: their values never enter a sandbox.
func (s Secrets) Env() map[string]string {
	out := make(map[string]string, len(s.m))
	for k, v := range s.m {
		if _, ok := s.brokers[k]; ok {
			continue
		}
		out[k] = v
	}
	return out
}

// Redact replaces every occurrence of every non-empty secret value in text
// with "[secret:NAME]". Longer values are replaced first, so a value that
// contains another is not half-redacted.
func (s Secrets) Redact(text string) string {
	names := s.Names()
	sort.SliceStable(names, func(i, j int) bool { return len(s.m[names[i]]) > len(s.m[names[j]]) })
	for _, n := range names {
		if v := s.m[n]; v != "" {
			text = strings.ReplaceAll(text, v, "[secret:"+n+"]")
		}
	}
	return text
}

// String lists the names, never the values.
func (s Secrets) String() string { return fmt.Sprintf("Secrets%v", s.Names()) }

// GoString lists the names, never the values.
func (s Secrets) GoString() string { return s.String() }

// Format makes every fmt verb print the names only.
func (s Secrets) Format(f fmt.State, _ rune) { _, _ = fmt.Fprint(f, s.String()) }

// MarshalJSON encodes the names only.
func (s Secrets) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string][]string{"redacted": s.Names()})
}

// LogValue makes slog print the names only.
func (s Secrets) LogValue() slog.Value { return slog.AnyValue(s.Names()) }

// With returns a copy of s that also holds name = value (a secret the
// runner adds for one run); s is unchanged. Brokers are kept.
func (s Secrets) With(name, value string) Secrets {
	m := make(map[string]string, len(s.m)+1)
	for k, v := range s.m {
		m[k] = v
	}
	m[name] = value
	return Secrets{m: m, brokers: s.brokers}
}
