package storeurl

import (
	"strings"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store/internal/redact"
)

// FuzzParse: Parse never panics, fails only with InvalidArgument, and
// neither its error nor the target's String holds a password of the URL.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"memory:", "memory://", "sqlite:x.db", "sqlite:///a/b.db", "/a/b.db", "x.db", "x:y",
		"postgres://u:p@h/db", "postgresql://u:p%40ss@h:5432/db?sslmode=disable&password=q",
		"postgres://u:p@ss@h/db", "postgres://u:p/ss@h/db", "postgres://u:1234#x@h/db", "postgres://h,i/db",
		"postgres:u:pass@h", "mysql://u:p@h", "", " ", "sqlite:", "\x00", "postgres://[::1]:5432/db",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := Parse(raw)
		// Secrets long enough, and standing once in the URL, so that
		// finding one elsewhere is not a coincidence.
		var secrets []string
		for _, s := range redact.Secrets(raw) {
			if len(s) >= 6 && strings.Count(raw, s) <= 1 {
				secrets = append(secrets, s)
			}
		}
		shown := redact.URL(raw)
		for _, s := range secrets {
			if strings.Contains(shown, s) {
				t.Fatalf("redact.URL(%q) = %q holds the password %q", raw, shown, s)
			}
		}
		if err != nil {
			if c := sandbox.CodeOf(err); c != sandbox.InvalidArgument {
				t.Fatalf("Parse(%q): code %v (%v), want InvalidArgument", raw, c, err)
			}
			rest := strings.ReplaceAll(err.Error(), shown, "")
			for _, s := range secrets {
				if strings.Contains(rest, s) {
					t.Fatalf("Parse(%q) error holds the password %q: %v", raw, s, err)
				}
			}
			return
		}
		switch got.Kind {
		case Memory, SQLite, Postgres:
		default:
			t.Fatalf("Parse(%q): kind %q", raw, got.Kind)
		}
		if got.Kind == SQLite && got.Path == "" {
			t.Fatalf("Parse(%q): SQLite with no path", raw)
		}
		if got.Kind == Postgres {
			for _, s := range secrets {
				if strings.Contains(got.String(), s) {
					t.Fatalf("Target(%q).String() = %q holds the password %q", raw, got.String(), s)
				}
			}
		}
	})
}

// FuzzPasswordRedaction builds a PostgreSQL URL around an arbitrary
// password and checks that no error, target string or redacted form holds
// it, however the password breaks the URL's syntax.
func FuzzPasswordRedaction(f *testing.F) {
	for _, seed := range [][3]string{
		{"corral", "corral-pw", "127.0.0.1:5432"}, {"u", "p@ss/w?rd#x", "h"}, {"u", "%zz%41", "h:1"},
		{"u", "1234#frag", "h"}, {"u", "a:b:c", "h"}, {"", "only-pass", "h"}, {"u", "sp ace", "h"},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, user, pw, host string) {
		if strings.ContainsAny(user, ":@/?#") || strings.ContainsAny(host, "@") || len(pw) < 4 {
			t.Skip("input outside the property: a user or host with URL delimiters, or a password under 4 bytes")
		}
		for _, form := range []string{
			"postgres://" + user + ":" + pw + "@" + host + "/db",
			"postgresql://" + user + ":" + pw + "@" + host + "/db?sslmode=disable",
		} {
			if strings.Contains(strings.Replace(form, pw, "", 1), pw) || strings.Contains(redact.Mask, pw) {
				continue // the password also stands elsewhere in the URL: nothing to check
			}
			if r := redact.URL(form); strings.Contains(r, pw) {
				t.Fatalf("redact.URL(%q) = %q holds the password", form, r)
			}
			got, err := Parse(form)
			if err != nil {
				if strings.Contains(err.Error(), pw) {
					t.Fatalf("Parse(%q) error holds the password: %v", form, err)
				}
				continue
			}
			if strings.Contains(got.String(), pw) {
				t.Fatalf("Target(%q).String() = %q holds the password", form, got.String())
			}
		}
	})
}
