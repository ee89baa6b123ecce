package sandbox_test

import (
	"testing"

	"github.com/d10ffeed/corral/sandbox"
)

func TestSplitBrokerHost(t *testing.T) {
	for _, tt := range []struct {
		in, scheme, host string
		ok               bool
	}{
		{"api.anthropic.com", "https", "api.anthropic.com", true},
		{"API.Example.com:8443", "https", "api.example.com:8443", true},
		{"http://127.0.0.1:9999", "http", "127.0.0.1:9999", true},
		{"https://[::1]:443", "https", "[::1]:443", true},
		{"a.example/v1", "", "", false},
		{"a.example:0", "", "", false},
		{"a.example:x", "", "", false},
		{"user@a.example", "", "", false},
		{"", "", "", false},
		{".a.example", "", "", false},
	} {
		scheme, host, err := sandbox.SplitBrokerHost(tt.in)
		if (err == nil) != tt.ok || scheme != tt.scheme || host != tt.host {
			t.Errorf("%q: %q %q %v", tt.in, scheme, host, err)
		}
	}
}

func TestBrokeredSecretsStayOutOfEnv(t *testing.T) {
	s, _ := sandbox.NewSecrets(map[string]string{"K": "real", "P": "plain"})
	s, err := s.WithBrokers(map[string]sandbox.Broker{"K": {Hosts: []string{"a.example"}, Header: "bearer"}})
	if err != nil {
		t.Fatal(err)
	}
	if e := s.Env(); len(e) != 1 || e["P"] != "plain" {
		t.Errorf("env %v", e)
	}
	ph := s.WithPlaceholders(func(n string) string { return "ph-" + n })
	if v, _ := ph.Value("K"); v != "ph-K" {
		t.Errorf("placeholder %q", v)
	}
	if v, _ := ph.Value("P"); v != "plain" {
		t.Errorf("plain %q", v)
	}
	if _, err := s.WithBrokers(map[string]sandbox.Broker{"NOPE": {Hosts: []string{"a.example"}, Header: "bearer"}}); err == nil {
		t.Error("a broker for an unknown secret was accepted")
	}
}

func TestEgressAllows(t *testing.T) {
	list := []string{"api.anthropic.com", "*.npmjs.org", "127.0.0.1:8080"}
	for host, want := range map[string]bool{
		"api.anthropic.com:443":  true,
		"api.anthropic.com:80":   true,
		"registry.npmjs.org:443": true,
		"npmjs.org:443":          false,
		"evilnpmjs.org:443":      false,
		"127.0.0.1:8080":         true,
		"127.0.0.1:8081":         false,
		"anthropic.com:443":      false,
	} {
		if got := sandbox.EgressAllows(list, host); got != want {
			t.Errorf("%s: %v, want %v", host, got, want)
		}
	}
}
