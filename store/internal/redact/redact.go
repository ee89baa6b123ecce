// Package redact keeps database passwords out of error messages and logs.
//
// URL hides the password of a connection URL (its userinfo and any
// password query parameter), also when the URL is malformed: where the
// structure is unclear it hides more, never less. Error scrubs the
// passwords of a URL out of an error's message.
package redact

import (
	"net/url"
	"regexp"
	"strings"

	"github.com/d10ffeed/corral/sandbox"
)

// Mask replaces a password.
const Mask = "xxxxx"

// passwordParam matches a password parameter (password=, sslpassword=, in
// a query or a key=value string) up to its end.
var passwordParam = regexp.MustCompile(`(?i)(password=)[^&#]*`)

// URL returns raw with its passwords replaced by Mask. Everything else is
// kept byte for byte (never re-encoded).
func URL(raw string) string {
	out := raw
	if strings.ContainsRune(raw, '@') {
		// By default the widest mask; the precise one only where the URL
		// parses and no '@' stands after its user information.
		out = redactAuthority(raw)
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			if masked, ok := maskParsedPassword(raw); ok {
				out = masked
			}
		}
	}
	return passwordParam.ReplaceAllString(out, "${1}"+Mask)
}

// maskParsedPassword masks the password of a URL that url.Parse accepted
// with user information, found the way url.Parse finds it: the authority
// runs from "//" to the first '/', '?' or '#'; the user information ends
// at its last '@'; the password starts after the first ':' in it. ok is
// false when that reading is in doubt (an '@' after the authority).
func maskParsedPassword(raw string) (masked string, ok bool) {
	i := strings.Index(raw, "//")
	if i < 0 {
		return "", false
	}
	start := i + 2
	auth := raw[start:]
	if end := strings.IndexAny(auth, "/?#"); end >= 0 {
		auth = auth[:end]
	}
	at := strings.LastIndexByte(auth, '@')
	if at < 0 || strings.ContainsRune(raw[start+len(auth):], '@') {
		return "", false
	}
	colon := strings.IndexByte(auth[:at], ':')
	if colon < 0 {
		return raw, true // a user name, no password
	}
	return raw[:start+colon+1] + Mask + raw[start+at:], true
}

// redactAuthority masks everything between the first ':' after "://" and
// the last '@' of a URL that did not parse. The password may hold any
// character, so the last '@' is the only safe end; when a later part holds
// an '@', more than the password is masked.
func redactAuthority(raw string) string {
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		rest = raw
	}
	start := len(raw) - len(rest)
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return raw
	}
	colon := strings.IndexByte(rest[:at], ':')
	if colon < 0 {
		return raw
	}
	return raw[:start+colon+1] + Mask + raw[start+at:]
}

// Secrets returns the passwords raw carries, as written and decoded, for
// Error. It finds the same passwords URL masks.
func Secrets(raw string) []string {
	var out []string
	add := func(s string) {
		if s == "" || s == Mask {
			return
		}
		out = append(out, s)
		if d, err := url.PathUnescape(s); err == nil && d != s && d != "" {
			out = append(out, d)
		}
		if d, err := url.QueryUnescape(s); err == nil && d != s && d != "" {
			out = append(out, d)
		}
	}
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		if p, has := u.User.Password(); has {
			add(p)
			add(url.UserPassword("", p).String()[1:]) // as re-encoded
		}
	}
	// The raw userinfo too, whether or not the URL parsed.
	if _, rest, ok := strings.Cut(raw, "://"); ok {
		if at := strings.LastIndexByte(rest, '@'); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
				add(pw)
			}
		}
	}
	for _, m := range passwordParam.FindAllStringSubmatchIndex(raw, -1) {
		add(raw[m[3]:m[1]])
	}
	return out
}

// Error returns err unchanged when its message holds none of secrets;
// otherwise a new error with the same code, op and id whose message has
// every secret replaced by Mask (the cause is dropped: it would carry the
// secret).
func Error(err error, secrets []string) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	msg := err.Error()
	scrubbed := Message(msg, secrets)
	if scrubbed == msg {
		return err
	}
	return &sandbox.Error{Code: sandbox.CodeOf(err), Msg: scrubbed}
}

// Message replaces every secret in msg by Mask, longest first.
func Message(msg string, secrets []string) string {
	sorted := append([]string(nil), secrets...)
	// Longest first, so a secret that contains another is masked whole.
	for i := range sorted {
		for j := i + 1; j < len(sorted); j++ {
			if len(sorted[j]) > len(sorted[i]) {
				sorted[i], sorted[j] = sorted[j], sorted[i]
			}
		}
	}
	for _, s := range sorted {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, Mask)
		}
	}
	return msg
}
