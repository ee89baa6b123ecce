// Package storeurl opens a store.Store named by a URL, the one string a
// corral process is configured with:
//
//	memory:                        in-process (store/memstore); also memory://
//	sqlite:PATH                    one SQLite file (store/sqlitestore); also sqlite://PATH
//	sqlite://PATH?synchronous=full     the same with sqlitestore.Options.Synchronous
//	PATH                           a bare file path, the same as sqlite:PATH
//	postgres://USER:PASS@HOST/DB   PostgreSQL (store/pgstore); also postgresql://
//
// A PostgreSQL URL takes every parameter pgx accepts (sslmode,
// connect_timeout, pool_max_conns, ...). A bare path whose first segment
// looks like a URL scheme ("x:y.db") is read as one and refused; write
// "./x:y.db" or "sqlite:x:y.db". Malformed and unknown URLs are
// InvalidArgument. A URL's password never appears in an error message, in
// Target.String or in a log line.
package storeurl

import (
	"context"
	"log/slog"
	"regexp"
	"runtime"
	"strings"
	"unicode"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/internal/redact"
	"github.com/d10ffeed/corral/store/memstore"
	"github.com/d10ffeed/corral/store/pgstore"
	"github.com/d10ffeed/corral/store/sqlitestore"
)

// Kind names a store implementation.
type Kind string

// The store kinds a URL can name.
const (
	Memory   Kind = "memory"
	SQLite   Kind = "sqlite"
	Postgres Kind = "postgres"
)

// Target is a parsed store URL.
type Target struct {
	// Kind is the implementation the URL names.
	Kind Kind
	// Path is the SQLite database file (Kind SQLite only).
	Path string
	// Synchronous is the SQLite synchronous setting the URL asks for
	// ("" the store's default, normal; or full).
	Synchronous string
	// url is the PostgreSQL URL as given, password included.
	url string
}

// String returns the target in URL form with any password masked.
func (t Target) String() string {
	switch t.Kind {
	case Memory:
		return "memory:"
	case SQLite:
		if t.Synchronous != "" {
			return "sqlite://" + t.Path + "?synchronous=" + t.Synchronous
		}
		return "sqlite:" + t.Path
	case Postgres:
		return redact.URL(t.url)
	}
	return ""
}

// Options configures Open.
type Options struct {
	// Logger is handed to the store; nil discards its logs.
	Logger *slog.Logger
	// PostgresSchema, for a PostgreSQL URL, confines the store to that
	// schema (see pgstore.Options.Schema).
	PostgresSchema string
}

const op = "store.url"

var schemeRE = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*):`)

// Parse reads a store URL without opening anything.
func Parse(raw string) (Target, error) {
	shown := redact.URL(raw)
	bad := func(format string, args ...any) (Target, error) {
		return Target{}, sandbox.Errorf(sandbox.InvalidArgument, op, shown, format, args...)
	}
	switch {
	case raw == "":
		return bad("empty store URL (want memory:, sqlite:PATH, a file path or postgres://...)")
	case strings.TrimSpace(raw) != raw:
		return bad("store URL has leading or trailing white space")
	case strings.IndexFunc(raw, unicode.IsControl) >= 0:
		return bad("store URL holds a control character")
	}
	m := schemeRE.FindStringSubmatch(raw)
	if m == nil || (runtime.GOOS == "windows" && len(m[1]) == 1) { // C:\... is a path
		return sqliteTarget(raw, raw, false)
	}
	rest := raw[len(m[0]):]
	switch scheme := strings.ToLower(m[1]); scheme {
	case "memory":
		if rest != "" && rest != "//" {
			return bad("memory: takes nothing after the scheme")
		}
		return Target{Kind: Memory}, nil
	case "sqlite":
		path, uriForm := strings.CutPrefix(rest, "//")
		return sqliteTarget(raw, path, uriForm)
	case "postgres", "postgresql":
		if err := pgstore.CheckURL(raw); err != nil {
			return Target{}, err
		}
		return Target{Kind: Postgres, url: raw}, nil
	default:
		return bad("unknown store URL scheme %q (want memory:, sqlite:PATH, a file path or postgres://...)", scheme)
	}
}

func sqliteTarget(raw, path string, uriForm bool) (Target, error) {
	shown := redact.URL(raw)
	switch {
	case path == "":
		return Target{}, sandbox.Errorf(sandbox.InvalidArgument, op, shown, "sqlite: needs a file path")
	case path == ":memory:" || strings.HasPrefix(path, "file:"):
		return Target{}, sandbox.Errorf(sandbox.InvalidArgument, op, shown,
			"sqlite: needs a plain file path (for an in-process store use memory:)")
	case uriForm && strings.Contains(path, "#"):
		return Target{}, sandbox.Errorf(sandbox.InvalidArgument, op, shown,
			"sqlite:// takes no fragment; write sqlite:PATH for a file name with ? or #")
	}
	t := Target{Kind: SQLite, Path: path}
	if uriForm {
		p, query, ok := strings.Cut(path, "?")
		if ok {
			t.Path = p
			key, value, _ := strings.Cut(query, "=")
			switch value = strings.ToLower(value); {
			case key != "synchronous" || strings.ContainsAny(value, "&;="):
				return Target{}, sandbox.Errorf(sandbox.InvalidArgument, op, shown,
					"sqlite:// takes one query parameter, synchronous=full|normal; write sqlite:PATH for a file name with ? or #")
			case value != "full" && value != "normal":
				return Target{}, sandbox.Errorf(sandbox.InvalidArgument, op, shown, "sqlite: synchronous=%s: want full or normal", value)
			}
			t.Synchronous = value
			if t.Path == "" {
				return Target{}, sandbox.Errorf(sandbox.InvalidArgument, op, shown, "sqlite: needs a file path")
			}
		}
	}
	return t, nil
}

// Open parses raw and opens the store it names.
func Open(ctx context.Context, raw string, opts Options) (store.Store, error) {
	t, err := Parse(raw)
	if err != nil {
		return nil, err
	}
	switch t.Kind {
	case Memory:
		return memstore.New(memstore.Options{Logger: opts.Logger}), nil
	case SQLite:
		return sqlitestore.Open(ctx, t.Path, sqlitestore.Options{Logger: opts.Logger, Synchronous: t.Synchronous})
	default:
		return pgstore.Open(ctx, t.url, pgstore.Options{Logger: opts.Logger, Schema: opts.PostgresSchema})
	}
}
