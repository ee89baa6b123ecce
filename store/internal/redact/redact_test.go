package redact

import (
	"errors"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
)

func TestURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://u:pw@h:5432/db?sslmode=disable", "postgres://u:xxxxx@h:5432/db?sslmode=disable"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"postgres://h/db", "postgres://h/db"},
		{"postgres://u:p%40ss@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://u:@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://u@h/db?password=pw&sslmode=disable", "postgres://u@h/db?password=xxxxx&sslmode=disable"},
		{"postgres://u@h/db?sslpassword=pw", "postgres://u@h/db?sslpassword=xxxxx"},
		{"host=h password=pw dbname=d", "host=h password=xxxxx"},
		// Malformed: the mask runs to the last '@'.
		{"postgres://u:p@ss/w@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://u:p/ss@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://u:1234#x@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres://0:@#00@0/db", "postgres://0:xxxxx@0/db"},
		{"postgres://u:p%zz@h/db", "postgres://u:xxxxx@h/db"},
		{"postgres:u:pw@h", "postgres:xxxxx@h"},
		// Bytes outside the password are kept as written.
		{"postgres://u:pw@\xb0host/db", "postgres://u:xxxxx@\xb0host/db"},
	} {
		if got := URL(c.in); got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestSecretsAndError(t *testing.T) {
	raw := "postgres://u:p%40ss@h/db?password=other"
	secrets := Secrets(raw)
	for _, want := range []string{"p%40ss", "p@ss", "other"} {
		found := false
		for _, s := range secrets {
			found = found || s == want
		}
		if !found {
			t.Errorf("Secrets(%q) = %q, missing %q", raw, secrets, want)
		}
	}
	err := &sandbox.Error{Code: sandbox.Unavailable, Op: "x", Err: errors.New("failed with p@ss and other")}
	got := Error(err, secrets)
	if strings.Contains(got.Error(), "p@ss") || strings.Contains(got.Error(), "other") {
		t.Fatalf("Error left a secret: %v", got)
	}
	if sandbox.CodeOf(got) != sandbox.Unavailable {
		t.Fatalf("Error changed the code: %v", sandbox.CodeOf(got))
	}
	clean := errors.New("nothing to hide")
	if Error(clean, secrets) != clean {
		t.Fatal("Error rewrote an error without secrets")
	}
	if Error(nil, secrets) != nil {
		t.Fatal("Error(nil) != nil")
	}
}
