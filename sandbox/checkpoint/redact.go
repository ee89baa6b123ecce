package checkpoint

import (
	"bytes"
	"strings"
)

// Redact returns data with every occurrence of every non-empty secret
// zeroed: the union of all matched ranges, overlapping occurrences and
// overlapping secrets included, is set to NUL bytes, so the length is kept
// and nothing of a secret survives. Matches are found in the original
// bytes. data itself is never changed; when nothing matches it is returned
// as is. The work is linear in len(data) per secret (Knuth–Morris–Pratt),
// whatever the input.
func Redact(data []byte, secrets []string) []byte {
	var out []byte
	for _, s := range secrets {
		if s == "" || len(s) > len(data) {
			continue
		}
		if !bytes.Contains(data, []byte(s)) {
			continue
		}
		if out == nil {
			out = bytes.Clone(data)
		}
		zeroMatches(data, out, s)
	}
	if out == nil {
		return data
	}
	return out
}

// zeroMatches zeroes in out every range where pat occurs in data.
func zeroMatches(data, out []byte, pat string) {
	fail := make([]int, len(pat))
	for i, k := 1, 0; i < len(pat); i++ {
		for k > 0 && pat[i] != pat[k] {
			k = fail[k-1]
		}
		if pat[i] == pat[k] {
			k++
		}
		fail[i] = k
	}
	zeroed := 0 // out[:zeroed] is already zero where a match covered it
	for i, k := 0, 0; i < len(data); i++ {
		for k > 0 && data[i] != pat[k] {
			k = fail[k-1]
		}
		if data[i] == pat[k] {
			k++
		}
		if k == len(pat) {
			start := i + 1 - len(pat)
			clear(out[max(start, zeroed) : i+1])
			zeroed = i + 1
			k = fail[k-1]
		}
	}
}

// containsSecret reports whether s holds any non-empty secret.
func containsSecret(s string, secrets []string) bool {
	for _, v := range secrets {
		if v != "" && strings.Contains(s, v) {
			return true
		}
	}
	return false
}
