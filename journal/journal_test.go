package journal_test

import (
	"strings"
	"testing"

	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/local"
)

func TestConformanceLocal(t *testing.T) {
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	journaltest.Run(t, journaltest.Harness{Provider: p})
}

func TestToken(t *testing.T) {
	for _, tt := range []struct{ id, tok string }{
		{"run-1.a", "run-1.a"},
		{"a_b", "a_5fb"},
		{"a b/c", "a_20b_2fc"},
		{".hidden", "_2ehidden"},
		{"ü", "_c3_bc"},
	} {
		got, err := journal.Token(tt.id)
		if err != nil || got != tt.tok {
			t.Errorf("Token(%q) = %q, %v; want %q", tt.id, got, err, tt.tok)
		}
		back, err := journal.DecodeToken(got)
		if err != nil || back != tt.id {
			t.Errorf("DecodeToken(%q) = %q, %v", got, back, err)
		}
	}
	long := strings.Repeat("x", 250)
	tok, _ := journal.Token(long)
	if len(tok) != journal.MaxTokenLength {
		t.Errorf("long token length %d", len(tok))
	}
	if _, err := journal.DecodeToken(tok); err != journal.ErrTruncatedToken {
		t.Errorf("decoding a truncated token: %v", err)
	}
	for _, bad := range []string{"", "a_5", "a_ZZ", "a_5F", "a b", ".x", "a_61"} {
		if _, err := journal.DecodeToken(bad); err == nil {
			t.Errorf("DecodeToken(%q) accepted a token Token cannot make", bad)
		}
	}
	if _, err := journal.Token(""); err == nil {
		t.Error("an empty run id must be refused")
	}
}

func FuzzToken(f *testing.F) {
	for _, s := range []string{"a", "a_b", "é", "../x", ".", "CON", strings.Repeat("z", 199)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		tok, err := journal.Token(id)
		if id == "" {
			if err == nil {
				t.Fatal("empty id accepted")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(tok, "/\x00 ") || strings.HasPrefix(tok, ".") || len(tok) > journal.MaxTokenLength {
			t.Fatalf("unsafe token %q for %q", tok, id)
		}
		back, err := journal.DecodeToken(tok)
		if err == nil && back != id {
			t.Fatalf("Token(%q) = %q decodes to %q: not injective", id, tok, back)
		}
	})
}

func FuzzParseSentinel(f *testing.F) {
	nonce := journal.NewNonce()
	f.Add(string(journal.SentinelLine(3, nonce)))
	f.Add(`{"__exit":1.5,"__nonce":"` + nonce + `"}`)
	f.Add(`{"__exit":"0","__nonce":"` + nonce + `"}`)
	f.Add(`not json`)
	f.Fuzz(func(t *testing.T, line string) {
		code, ok := journal.ParseSentinel([]byte(line), nonce)
		if ok && !strings.Contains(line, nonce) {
			t.Fatalf("accepted %q without the nonce (code %d)", line, code)
		}
		_, _ = journal.ParseStart([]byte(line))
	})
}

func TestParseSentinel(t *testing.T) {
	n := journal.NewNonce()
	for _, tt := range []struct {
		line string
		code int
		ok   bool
	}{
		{strings.TrimSpace(string(journal.SentinelLine(0, n))), 0, true},
		{strings.TrimSpace(string(journal.SentinelLine(143, n))), 143, true},
		{`{"__exit":0,"__nonce":"` + journal.NewNonce() + `"}`, 0, false},
		{`{"__exit":0}`, 0, false},
		{`{"__exit":"0","__nonce":"` + n + `"}`, 0, false},
		{`{"__exit":1.5,"__nonce":"` + n + `"}`, 0, false},
		{`[1]`, 0, false},
		{``, 0, false},
	} {
		code, ok := journal.ParseSentinel([]byte(tt.line), n)
		if ok != tt.ok || code != tt.code {
			t.Errorf("ParseSentinel(%q) = %d, %v; want %d, %v", tt.line, code, ok, tt.code, tt.ok)
		}
	}
}
