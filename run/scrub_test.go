package run

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/sandbox"
)

func mustSecrets(t *testing.T, m map[string]string) sandbox.Secrets {
	t.Helper()
	s, err := sandbox.NewSecrets(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestScrubForms puts a secret into a line in every form the scrubber
// knows and checks that no form survives, that each was replaced by the
// secret's name, and that a JSON line stays valid JSON.
func TestScrubForms(t *testing.T) {
	secret := `sk-Ab3/+x"q\ü€😀-0123456789`
	sc := newScrubber(mustSecrets(t, map[string]string{"API_KEY": secret, "SHORT": "abc"}))
	rnd := rand.New(rand.NewPCG(1, 2))
	noise := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rnd.IntN(256))
		}
		return b
	}
	js, _ := json.Marshal(map[string]string{"text": "key=" + secret + " end"})
	jsjs, _ := json.Marshal(map[string]string{"outer": string(js)})
	cases := map[string]string{
		"raw":       "the key is " + secret + ".",
		"hex":       "hex " + hex.EncodeToString([]byte(secret)),
		"HEX":       "HEX " + strings.ToUpper(hex.EncodeToString([]byte(secret))),
		"query":     "https://x.example/?k=" + url.QueryEscape(secret),
		"path":      "https://x.example/" + url.PathEscape(secret),
		"json":      string(js),
		"json-json": string(jsjs),
	}
	for i, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		cases[fmt.Sprintf("base64 %d alone", i)] = "b64: " + enc.EncodeToString([]byte(secret))
		for pre := 0; pre < 6; pre++ {
			text := append(append(noise(pre), secret...), noise(7)...)
			cases[fmt.Sprintf("base64 %d embedded after %d bytes", i, pre)] = enc.EncodeToString(text)
		}
	}
	forms := secretForms(secret)
	for name, text := range cases {
		out := sc.line([]byte(text))
		for _, f := range forms {
			if len(f) >= minScrubLen && bytes.Contains(out, []byte(f)) {
				t.Errorf("%s: a form %q survived in %q", name, f, out)
			}
		}
		if !bytes.Contains(out, []byte("[secret:API_KEY]")) {
			t.Errorf("%s: no [secret:API_KEY] in %q", name, out)
		}
		if strings.HasPrefix(name, "json") && !json.Valid(out) {
			t.Errorf("%s: the scrubbed line is not valid JSON: %s", name, out)
		}
	}
	if got := string(sc.line([]byte("abc abc"))); got != "abc abc" {
		t.Errorf("a secret shorter than %d bytes was scrubbed: %q", minScrubLen, got)
	}
	if newScrubber(mustSecrets(t, map[string]string{"A": "ab"})) != nil {
		t.Error("a scrubber for a 2-byte secret")
	}
	t.Logf("%d forms of a %d-byte secret; %d cases scrubbed", len(forms), len(secret), len(cases))
}

// TestScrubJSONEscapes checks that a replacement inside a JSON string
// keeps it valid when the match starts or ends inside an escape.
func TestScrubJSONEscapes(t *testing.T) {
	sc := newScrubber(mustSecrets(t, map[string]string{"S": `nsecret\`}))
	for _, line := range []string{`{"a":"x\nsecret\\"}`, `{"a":"\nsecret\"q"}`, `{"a":"\\nsecret\\\\"}`} {
		if !json.Valid([]byte(line)) {
			t.Fatalf("bad test line %s", line)
		}
		if out := sc.line([]byte(line)); !json.Valid(out) {
			t.Errorf("%s → %s: not valid JSON", line, out)
		}
	}
}

// TestScrubPiecesAsWhole cuts lines at random points into pieces and
// checks the pieces scrub to exactly what the whole line does.
func TestScrubPiecesAsWhole(t *testing.T) {
	secrets := map[string]string{"A": "s3cret-value-1", "B": `quote"back\slash`, "C": "zzzz"}
	sc := newScrubber(mustSecrets(t, secrets))
	rnd := rand.New(rand.NewPCG(3, 4))
	var parts []string
	for _, v := range secrets {
		for _, f := range secretForms(v) {
			if len(f) >= minScrubLen {
				parts = append(parts, f)
			}
		}
	}
	parts = append(parts, `\`, `\\`, "x", "zz", "s3cret-", " ", `"`)
	cuts := 0
	for i := 0; i < 500; i++ {
		var line []byte
		for n := rnd.IntN(40); n > 0; n-- {
			line = append(line, parts[rnd.IntN(len(parts))]...)
		}
		whole := append([]byte(nil), sc.line(line)...)
		var got []byte
		rest := line
		for len(rest) > 0 {
			n := 1 + rnd.IntN(len(rest))
			if rnd.IntN(3) == 0 {
				n = min(len(rest), 1+rnd.IntN(3))
			}
			final := n == len(rest)
			got = append(got, sc.piece(rest[:n], final)...)
			// A whole text scrubbed between two pieces (the wrapper's
			// diff, an error tail) neither sees nor disturbs the tail
			// kept for the next piece.
			if other := []byte(`x ` + secrets["A"] + ` y`); string(sc.line(other)) != "x [secret:A] y" {
				t.Fatalf("line between pieces: %q", sc.line(other))
			}
			rest = rest[n:]
			cuts++
		}
		if len(line) == 0 {
			got = sc.line(nil)
		}
		if !bytes.Equal(got, whole) {
			t.Fatalf("line %q\nwhole  %q\npieces %q", line, whole, got)
		}
	}
	t.Logf("500 lines in %d pieces: pieces scrub as the whole line", cuts)
}

// BenchmarkScrub measures scrubbing a line that holds no secret, with one
// secret of an API key's length.
func BenchmarkScrub(b *testing.B) {
	for name, v := range map[string]string{"api-key": "sk-ant-api03-" + strings.Repeat("x1Y2", 20), "odd-chars": `sk-Ab3/+x"q\ü€😀-0123456789`} {
		b.Run(name, func(b *testing.B) {
			s, _ := sandbox.NewSecrets(map[string]string{"ANTHROPIC_API_KEY": v})
			sc := newScrubber(s)
			line := []byte(strings.Repeat(`{"type":"text","text":"hello world, nothing secret here"} `, 20))
			b.SetBytes(int64(len(line)))
			b.ReportMetric(float64(len(sc.pats)), "forms")
			for b.Loop() {
				sc.line(line)
			}
		})
	}
}
