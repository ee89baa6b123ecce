package sandbox_test

import (
	"strings"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
)

// The key's test vectors pin the canonical encoding: any change to it
// changes every key and orphans every recorded sandbox.
func TestKeyVectors(t *testing.T) {
	for _, tt := range []struct {
		name      string
		in        sandbox.KeyInput
		canonical string
		key       string
	}{
		{"empty", sandbox.KeyInput{}, `{}`, "44136fa355b3678a1146ad16f7e8649e"},
		{"thread only", sandbox.KeyInput{Thread: "t"}, `{"thread":"t"}`, ""},
		{"full", sandbox.KeyInput{Thread: "t", Definition: "s", Provider: "p", WorkspaceHash: "w", Tenant: "acme"},
			`{"definition":"s","provider":"p","tenant":"acme","thread":"t","workspace":"w"}`, ""},
		{"html is not escaped", sandbox.KeyInput{Thread: "<a&b>"}, `{"thread":"<a&b>"}`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(sandbox.Canonical(tt.in)); got != tt.canonical {
				t.Errorf("canonical = %s, want %s", got, tt.canonical)
			}
			if tt.key != "" {
				if got := sandbox.Key(tt.in); got != tt.key {
					t.Errorf("key = %s, want %s", got, tt.key)
				}
			}
		})
	}
	golden := map[string]string{
		"t/s/p":      sandbox.Key(sandbox.KeyInput{Thread: "t", Definition: "s", Provider: "p"}),
		"t/s/p/acme": sandbox.Key(sandbox.KeyInput{Thread: "t", Definition: "s", Provider: "p", Tenant: "acme"}),
	}
	want := map[string]string{
		"t/s/p":      "dd1f88ad7135ad62146b2cb9bafee099",
		"t/s/p/acme": "0f60751fc5677be995082c74eb2ae166",
	}
	for k, v := range golden {
		if want[k] != v {
			t.Errorf("key %s = %s, want %s", k, v, want[k])
		}
	}
}

func TestKeyProperties(t *testing.T) {
	base := sandbox.KeyInput{Thread: "t", Definition: "d", Provider: "local"}
	k := sandbox.Key(base)
	if len(k) != 32 || strings.Trim(k, "0123456789abcdef") != "" {
		t.Errorf("key %q is not 32 hex digits", k)
	}
	for name, in := range map[string]sandbox.KeyInput{
		"thread":     {Thread: "t2", Definition: "d", Provider: "local"},
		"definition": {Thread: "t", Definition: "d2", Provider: "local"},
		"provider":   {Thread: "t", Definition: "d", Provider: "docker"},
		"workspace":  {Thread: "t", Definition: "d", Provider: "local", WorkspaceHash: "x"},
		"tenant":     {Thread: "t", Definition: "d", Provider: "local", Tenant: "acme"},
	} {
		if sandbox.Key(in) == k {
			t.Errorf("changing %s does not change the key", name)
		}
	}
	if sandbox.Key(base) != k {
		t.Error("the key is not stable")
	}
}

func TestWorkspaceHash(t *testing.T) {
	s1, _ := sandbox.NewSecrets(map[string]string{"TOKEN": "one"})
	s2, _ := sandbox.NewSecrets(map[string]string{"TOKEN": "two", "OTHER": "x"})
	a := &sandbox.Workspace{Source: &sandbox.Source{Git: "owner/repo"}, Setup: []sandbox.SetupStep{{Run: "make"}}, Secrets: s1}
	b := &sandbox.Workspace{Source: &sandbox.Source{Git: "owner/repo"}, Setup: []sandbox.SetupStep{{Run: "make"}}, Secrets: s2}
	if a.Hash() != b.Hash() {
		t.Error("the workspace hash must ignore secrets")
	}
	c := &sandbox.Workspace{Source: &sandbox.Source{Git: "owner/repo"}, Setup: []sandbox.SetupStep{{Run: "make all"}}}
	if a.Hash() == c.Hash() {
		t.Error("the workspace hash must change with setup")
	}
	d := &sandbox.Workspace{Source: &sandbox.Source{Git: "owner/repo", Ref: "v2"}, Setup: []sandbox.SetupStep{{Run: "make"}}}
	if a.Hash() == d.Hash() {
		t.Error("the workspace hash must change with the ref")
	}
	if strings.Contains(string(sandbox.Canonical(a)), "one") {
		t.Error("a secret value reached the canonical encoding")
	}
	var nilWS *sandbox.Workspace
	if nilWS.Hash() != "" {
		t.Error("a nil workspace hashes as empty (absent from the key)")
	}
}
