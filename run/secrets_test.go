package run_test

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/server"
	"github.com/d10ffeed/corral/store"
)

// secretAgent prints the secret $API_TOKEN raw, base64'd on its own and
// inside longer text (three alignments), hex'd, inside JSON (escaped as
// JSON encoders do it) and URL-encoded (the encoded forms the shell cannot
// compute come in FORM_* variables, which are not secrets), then a long
// line with the secret in the middle.
const secretAgent = `printf '%s\n' "the token is $API_TOKEN"
printf '%s' "$API_TOKEN" | base64 | tr -d '\n'; echo
printf 'x%s tail' "$API_TOKEN" | base64 | tr -d '\n'; echo
printf 'xy%s tail' "$API_TOKEN" | base64 | tr -d '\n'; echo
printf 'xyz%s tail' "$API_TOKEN" | base64 | tr -d '\n'; echo
printf '%s' "$API_TOKEN" | od -An -tx1 | tr -d ' \n'; echo
printf '{"type":"note","text":"%s"}\n' "$FORM_JSON"
printf '{"type":"note","text":"%s"}\n' "$FORM_JSON_ASCII"
printf 'https://example.test/cb?token=%s\n' "$FORM_QUERY"
head -c 3000 /dev/zero | tr '\0' a; printf '%s' "$API_TOKEN"; head -c 3000 /dev/zero | tr '\0' b; echo
`

// forms lists what must not reach an event: the value and its encodings.
func forms(v string) []string {
	js, _ := json.Marshal(v)
	out := []string{v, base64.StdEncoding.EncodeToString([]byte(v)), base64.RawStdEncoding.EncodeToString([]byte(v)),
		hex.EncodeToString([]byte(v)), url.QueryEscape(v), string(js[1 : len(js)-1]), jsonASCII(v)}
	return out
}

func jsonASCII(v string) string {
	var b strings.Builder
	for _, r := range v {
		if r < 128 {
			js, _ := json.Marshal(string(r))
			b.Write(js[1 : len(js)-1])
		} else {
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// TestSecretsScrubbedFromEvents runs an agent that prints a workspace
// secret in many forms and looks for every form in the stored events (read
// back through the store) and in the SSE stream of the run's events, with
// lines whole and cut into pieces (a reader's MaxLine).
func TestSecretsScrubbedFromEvents(t *testing.T) {
	secret := fmt.Sprintf("canary-%d-s3cr3t/+?&\"é", time.Now().UnixNano())
	for _, piece := range []int{0, 7, 1000} {
		t.Run(fmt.Sprintf("pieces of %d", piece), func(t *testing.T) {
			prev := run.SetPieceSize(piece)
			t.Cleanup(func() { run.SetPieceSize(prev) })
			e := newEnv(t)
			secrets, err := sandbox.NewSecrets(map[string]string{"API_TOKEN": secret})
			if err != nil {
				t.Fatal(err)
			}
			e.def.Workspace = &sandbox.Workspace{Secrets: secrets}
			r := e.runner(t, run.Options{})
			srv, err := server.New(server.Options{Runner: r, Definitions: []string{"d"}, Harnesses: []string{command.Name}, Tokens: map[string]string{"tok": ""}})
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(srv.Handler())
			t.Cleanup(hs.Close)
			c := ctx(t)
			js, _ := json.Marshal(secret)
			rec, err := r.Start(c, run.StartRequest{Definition: "d", Harness: command.Name, Args: []string{"sh", "-c", secretAgent},
				Env: map[string]string{"FORM_JSON": string(js[1 : len(js)-1]), "FORM_JSON_ASCII": jsonASCII(secret), "FORM_QUERY": url.QueryEscape(secret)}})
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequestWithContext(c, "GET", hs.URL+"/v1/runs/"+rec.ID+"/events", nil)
			req.Header.Set("Authorization", "Bearer tok")
			req.Header.Set("Accept", "text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var sse strings.Builder
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				sse.WriteString(sc.Text() + "\n")
				if sc.Text() == ": end" {
					break
				}
			}
			if !strings.Contains(sse.String(), "\n: end\n") {
				t.Fatalf("the SSE stream did not end: %v\n%s", sc.Err(), sse.String())
			}
			_ = r.Wait(c, rec.ID)
			evs, err := e.st.ReadEvents(c, rec.ID, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			var stored, text strings.Builder
			for _, ev := range evs {
				stored.Write(ev.Data)
				stored.WriteByte('\n')
			}
			for _, ev := range collect(t, r, c, rec.ID, 0, false) {
				text.WriteString(ev.Delta)
			}
			for name, where := range map[string]string{"stored events": stored.String(), "decoded text": text.String(), "SSE stream": sse.String()} {
				for _, f := range forms(secret) {
					if strings.Contains(where, f) {
						t.Errorf("the %s hold the secret as %q", name, f)
					}
				}
			}
			if n := strings.Count(text.String(), "[secret:API_TOKEN]"); n < 10 {
				t.Errorf("%d redactions in the text, want 10 at least:\n%s", n, text.String())
			}
			if !strings.Contains(text.String(), strings.Repeat("a", 3000)+"[secret:API_TOKEN]"+strings.Repeat("b", 3000)) {
				t.Error("the long line is not whole around its redaction")
			}
			if got, _, _ := e.st.GetRun(c, rec.ID); got.Status != store.RunCompleted {
				t.Errorf("status %s (%s)", got.Status, got.Error)
			}
			t.Logf("pieces of %d: %d events, %d bytes of SSE, %d redactions, no form of the secret found", piece, len(evs), sse.Len(), strings.Count(text.String(), "[secret:API_TOKEN]"))
		})
	}
}
