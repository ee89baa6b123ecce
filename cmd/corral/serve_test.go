package main

// `corral serve` as the README starts it: it makes a token on its first
// start (owner-only, in the state directory), prints the page's address
// with it, keeps it across restarts, and the CLI's --server finds it.
// --no-auth says so on every start and still refuses other origins.

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// served is one `corral serve` process.
type served struct {
	cmd   *exec.Cmd
	url   string // from its "serving on" line
	mu    sync.Mutex
	log   strings.Builder
	lines chan string
	done  chan struct{}
}

var servingLine = regexp.MustCompile(`^corral: serving on (http://\S+) `)

// serveCLI starts `corral serve` on a free loopback port with the state
// directory stateDir and waits for its "serving on" line; it is stopped
// when the test ends.
func serveCLI(t testing.TB, stateDir string, args ...string) *served {
	t.Helper()
	return serveCLIEnv(t, stateDir, nil, append([]string{"--config", localConfig(t)}, args...)...)
}

// serveCLIEnv is serveCLI with extra environment variables and no
// definition of its own (args name the --config).
func serveCLIEnv(t testing.TB, stateDir string, extra []string, args ...string) *served {
	t.Helper()
	cmd := exec.Command(corralBin, append([]string{"serve", "--listen", "127.0.0.1:0", "--reap-interval", "1h"}, args...)...)
	cmd.Env = cliEnv(stateDir, extra...)
	return startServed(t, cmd)
}

// startServed starts cmd, a daemon that prints corral's "serving on" line
// on stderr, and waits for that line; it is stopped when the test ends.
func startServed(t testing.TB, cmd *exec.Cmd) *served {
	t.Helper()
	s := &served{cmd: cmd, lines: make(chan string, 100), done: make(chan struct{})}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.mu.Lock()
			s.log.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
			select {
			case s.lines <- sc.Text():
			default:
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() { s.stop(t) })
	deadline := time.After(time.Minute) // a hang guard
	for s.url == "" {
		select {
		case l := <-s.lines:
			if m := servingLine.FindStringSubmatch(l); m != nil {
				s.url = m[1]
			}
		case <-s.done:
			t.Fatalf("corral serve exited:\n%s", s.stderr())
		case <-deadline:
			t.Fatalf("corral serve printed no address within 30s:\n%s", s.stderr())
		}
	}
	return s
}

// line waits (bounded) for the next stderr line matching re.
func (s *served) line(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	deadline := time.After(time.Minute) // a hang guard
	for {
		select {
		case l := <-s.lines:
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-deadline:
			t.Fatalf("no line matching %s:\n%s", re, s.stderr())
		}
	}
}

func (s *served) stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// stop sends SIGTERM and waits (bounded) for the daemon to exit.
func (s *served) stop(t testing.TB) {
	t.Helper()
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		_ = s.cmd.Process.Kill()
		<-s.done
		t.Errorf("corral serve did not stop on SIGTERM:\n%s", s.stderr())
	}
}

// cliEnv is the environment of a CLI process with its own state directory
// and no CORRAL_ settings from outside.
func cliEnv(stateDir string, extra ...string) []string {
	env := []string{"XDG_STATE_HOME=" + stateDir}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CORRAL_") && !strings.HasPrefix(kv, "XDG_STATE_HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

func localConfig(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "corral.yaml")
	if err := os.WriteFile(p, []byte("provider:\n  name: local\n  local: {baseDir: "+filepath.Join(dir, "sandboxes")+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// corralIn runs the CLI with the environment env.
func corralIn(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, corralBin, args...)
	cmd.Env = env
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// get sends a GET with optional headers and returns the status.
func get(t *testing.T, url string, hdr map[string]string) int {
	t.Helper()
	return send(t, "GET", url, "", hdr)
}

func send(t *testing.T, method, url, body string, hdr map[string]string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

var pageLine = regexp.MustCompile(`^corral: open the web page at (http://\S+)/\?token=([0-9a-f]{48}) \(token (made and kept|kept) in (\S+);`)

func TestServeMakesAndKeepsItsToken(t *testing.T) {
	stateDir := t.TempDir()
	s := serveCLI(t, stateDir)
	m := s.line(t, pageLine)
	if m[1] != s.url || m[3] != "made and kept" {
		t.Fatalf("first start printed %q", m[0])
	}
	tok, path := m[2], m[4]
	if want := filepath.Join(stateDir, "corral", "daemon.token"); path != want {
		t.Fatalf("token kept in %s, want %s", path, want)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v %v, want mode 0600", fi, err)
	}
	di, err := os.Stat(filepath.Dir(path))
	if err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("state directory: %v %v, want mode 0700", di, err)
	}
	if b, _ := os.ReadFile(path); strings.TrimSpace(string(b)) != tok {
		t.Fatalf("the file holds %q, the daemon printed %q", b, tok)
	}
	if strings.Contains(s.stderr(), "WARNING") {
		t.Fatalf("a daemon with a token warns:\n%s", s.stderr())
	}

	// The API needs it; the page does not (it takes it from ?token=).
	for _, c := range []struct {
		what string
		path string
		hdr  map[string]string
		want int
	}{
		{"runs, no token", "/v1/runs", nil, 401},
		{"runs, wrong token", "/v1/runs", map[string]string{"Authorization": "Bearer " + strings.Repeat("0", 48)}, 401},
		{"metrics, no token", "/metrics", nil, 401},
		{"runs", "/v1/runs", map[string]string{"Authorization": "Bearer " + tok}, 200},
		{"metrics", "/metrics", map[string]string{"Authorization": "Bearer " + tok}, 200},
		{"the page", "/?token=" + tok, nil, 200},
		{"runs, rebound name", "/v1/runs", map[string]string{"Authorization": "Bearer " + tok, "Host": "attacker.example"}, 403},
	} {
		if got := get(t, s.url+c.path, c.hdr); got != c.want {
			t.Errorf("%s: %d, want %d", c.what, got, c.want)
		}
	}

	// The CLI finds the token in the state directory for a loopback
	// --server; CORRAL_TOKEN and --token win over it.
	env := cliEnv(stateDir)
	out, errOut, code := corralIn(t, env, "run", "--server", s.url, "--", "sh", "-c", "echo via-the-daemon")
	if code != 0 || out != "via-the-daemon\n" {
		t.Fatalf("corral run --server: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out, errOut, code := corralIn(t, env, "ps", "--all", "--server", s.url); code != 0 || !strings.Contains(out, "completed") {
		t.Fatalf("corral ps --server: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	refused := 0
	for _, c := range []struct {
		what string
		env  []string
		args []string
	}{
		{"a wrong --token", env, []string{"--token", "nope"}},
		{"a wrong CORRAL_TOKEN", cliEnv(stateDir, "CORRAL_TOKEN=nope"), nil},
		{"another state directory", cliEnv(t.TempDir()), nil},
	} {
		_, errOut, code := corralIn(t, c.env, append([]string{"run", "--server", s.url}, append(c.args, "--", "true")...)...)
		if code == 0 || !strings.Contains(errOut, "token") {
			t.Errorf("corral run --server with %s: exit %d, stderr %q; want a refusal naming the token", c.what, code, errOut)
			continue
		}
		refused++
	}
	if _, errOut, code := corralIn(t, cliEnv(t.TempDir(), "CORRAL_TOKEN="+tok), "run", "--server", s.url, "--", "true"); code != 0 {
		t.Fatalf("corral run with CORRAL_TOKEN: exit %d: %s", code, errOut)
	}

	// A restart reuses the token; so does a second daemon on the machine.
	s.stop(t)
	s2 := serveCLI(t, stateDir)
	m2 := s2.line(t, pageLine)
	if m2[2] != tok || m2[3] != "kept" {
		t.Fatalf("after a restart: %q, want the token %s kept", m2[0], tok)
	}
	if got := get(t, s2.url+"/v1/runs", map[string]string{"Authorization": "Bearer " + tok}); got != 200 {
		t.Fatalf("the old token after a restart: %d", got)
	}
	t.Logf("token file %04o in a %04o directory, reused after a restart; CLI requests with a wrong or missing token refused: %d of 3", fi.Mode().Perm(), di.Mode().Perm(), refused)
}

var warningLine = regexp.MustCompile(`^corral: WARNING: --no-auth: `)

func TestServeNoAuth(t *testing.T) {
	stateDir := t.TempDir()
	sent, refused := 0, 0
	for start := range 2 {
		s := serveCLI(t, stateDir, "--no-auth")
		if !warningLine.MatchString(strings.SplitN(s.stderr(), "\n", 2)[0]) {
			t.Fatalf("start %d: the first line is not the --no-auth warning:\n%s", start+1, s.stderr())
		}
		if strings.Contains(s.stderr(), "token=") {
			t.Fatalf("a --no-auth daemon prints a token:\n%s", s.stderr())
		}
		if got := get(t, s.url+"/v1/runs", nil); got != 200 {
			t.Fatalf("no token with --no-auth: %d", got)
		}
		// The browser rules stay on.
		marker := filepath.Join(t.TempDir(), "touched")
		body := `{"prompt":"touch ` + marker + `"}`
		for _, c := range []struct {
			what   string
			method string
			ct     string
			hdr    map[string]string
			want   int
		}{
			{"no-cors text/plain", "POST", "text/plain", map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}, 403},
			{"text/plain", "POST", "text/plain", nil, 415},
			{"form", "POST", "application/x-www-form-urlencoded", nil, 415},
			{"JSON from evil.example", "POST", "application/json", map[string]string{"Origin": "http://evil.example"}, 403},
			{"JSON, cross-site", "POST", "application/json", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
			{"JSON, rebound name", "POST", "application/json", map[string]string{"Host": "attacker.example"}, 403},
			{"list, rebound name", "GET", "", map[string]string{"Host": "attacker.example"}, 403},
		} {
			hdr := map[string]string{"Content-Type": c.ct}
			for k, v := range c.hdr {
				hdr[k] = v
			}
			sent++
			if got := send(t, c.method, s.url+"/v1/runs", body, hdr); got != c.want {
				t.Errorf("--no-auth, %s: %d, want %d", c.what, got, c.want)
				continue
			}
			refused++
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("a refused request touched its file")
		}
		s.stop(t)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "corral", "daemon.token")); err == nil {
		t.Error("--no-auth made a token file")
	}
	for _, args := range [][]string{
		{"serve", "--no-auth", "--token", "t=acme", "--listen", "127.0.0.1:0"},
		{"serve", "--no-auth", "--listen", "0.0.0.0:0"},
		{"serve", "--listen", "0.0.0.0:0"},
	} {
		if _, errOut, code := corralIn(t, cliEnv(stateDir), args...); code == 0 {
			t.Errorf("corral %v: exit 0, want a refusal", args)
		} else {
			t.Logf("corral %s: %s", strings.Join(args, " "), strings.TrimSpace(errOut))
		}
	}
	t.Logf("--no-auth warned on 2 of 2 starts; cross-site requests refused: %d of %d sent", refused, sent)
}
