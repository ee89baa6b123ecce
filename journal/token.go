package journal

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"unicode/utf8"
)

// MaxTokenLength is the longest file token; longer run ids are shortened
// with a digest, and such tokens cannot be decoded.
const MaxTokenLength = 200

const truncatedPrefix = MaxTokenLength - 17 // then "-" and 16 hex digits

// ErrTruncatedToken is returned by DecodeToken for a token that was
// shortened (its run id cannot be recovered).
var ErrTruncatedToken = errors.New("journal: token was truncated")

// Token maps a run id to a file name token, injectively: letters, digits,
// '-' and '.' stay (except a leading '.', so no journal is a hidden file);
// every other byte, '_' included, becomes '_' and two lowercase hex digits.
// Ids whose token would exceed MaxTokenLength keep a prefix plus "-" and 16
// hex digits of the SHA-256 of the id.
func Token(runID string) (string, error) {
	if runID == "" {
		return "", errors.New("journal: empty run id")
	}
	var b strings.Builder
	for i := 0; i < len(runID); i++ {
		c := runID[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || (c == '.' && i > 0) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('_')
		b.WriteString(hex.EncodeToString([]byte{c}))
	}
	tok := b.String()
	if len(tok) > MaxTokenLength {
		sum := sha256.Sum256([]byte(runID))
		tok = tok[:truncatedPrefix] + "-" + hex.EncodeToString(sum[:8])
	}
	return tok, nil
}

// DecodeToken returns the run id of a token made by Token. It fails closed:
// anything Token could not have produced is an error, and a truncated token
// is ErrTruncatedToken.
func DecodeToken(tok string) (string, error) {
	if tok == "" {
		return "", errors.New("journal: empty token")
	}
	if len(tok) > MaxTokenLength || (len(tok) == MaxTokenLength && tok[truncatedPrefix] == '-' && isHex(tok[truncatedPrefix+1:])) {
		return "", ErrTruncatedToken
	}
	var out []byte
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case c == '_':
			if i+3 > len(tok) || !isLowerHex(tok[i+1:i+3]) {
				return "", errors.New("journal: malformed token")
			}
			v, _ := hex.DecodeString(tok[i+1 : i+3])
			out = append(out, v[0])
			i += 2
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || (c == '.' && i > 0):
			out = append(out, c)
		default:
			return "", errors.New("journal: malformed token")
		}
	}
	id := string(out)
	if !utf8.ValidString(id) {
		return "", errors.New("journal: token decodes to invalid UTF-8")
	}
	// Canonical form only: re-encoding must give the token back.
	if again, err := Token(id); err != nil || again != tok {
		return "", errors.New("journal: token is not in canonical form")
	}
	return id, nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f' || s[i] >= 'A' && s[i] <= 'F') {
			return false
		}
	}
	return s != ""
}

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !(s[i] >= '0' && s[i] <= '9' || s[i] >= 'a' && s[i] <= 'f') {
			return false
		}
	}
	return s != ""
}
