package gateway_test

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
)

// TestGitThroughGateway: a brokered basic-auth token for a git host. The
// agent clones and pushes with plain git over HTTP; git's per-run
// configuration sends it through the gateway with the placeholder from a
// credential helper, the gateway swaps in the token, and the git server
// (git http-backend behind a Basic check of the real token) serves it.
func TestGitThroughGateway(t *testing.T) {
	testutil.NeedGit(t)
	backend, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	token := canary()
	root := filepath.Dir(strings.TrimPrefix(testutil.BareRepo(t, map[string]string{"README.md": "hello from git\n"}), "file://"))
	testutil.Git(t, root, "--git-dir=repo.git", "config", "http.receivepack", "true")
	var denied int
	gitSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "x-access-token" || p != token {
			denied++
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h := &cgi.Handler{Path: filepath.Join(strings.TrimSpace(string(backend)), "git-http-backend"),
			Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "REMOTE_USER=agent"}}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(gitSrv.Close)
	base := t.TempDir()
	p, err := local.New(local.Options{BaseDir: base})
	if err != nil {
		t.Fatal(err)
	}
	secrets, _ := sandbox.NewSecrets(map[string]string{"GIT_TOKEN": token})
	secrets, _ = secrets.WithBrokers(map[string]sandbox.Broker{"GIT_TOKEN": {Hosts: []string{gitSrv.URL}, Header: "basic"}})
	def := &sandbox.Definition{ID: "g", Provider: p, Workspace: &sandbox.Workspace{Secrets: secrets}}
	k := newKit(t, def, nil)
	agent := `set -e
git clone -q "$REPO" clone
cat clone/README.md
cd clone && echo more >> README.md && git -c user.name=a -c user.email=a@example.invalid commit -qam more && git push -q origin main && echo pushed`
	_, text := k.complete(t, run.StartRequest{Definition: "g", Harness: command.Name, Args: []string{"sh", "-c", agent},
		Env: map[string]string{"REPO": gitSrv.URL + "/repo.git", "GIT_TERMINAL_PROMPT": "0", "HOME": t.TempDir()}})
	if !strings.Contains(text, "hello from git") || !strings.Contains(text, "pushed") {
		t.Fatalf("clone and push through the gateway:\n%s", text)
	}
	if got := testutil.Git(t, root, "--git-dir=repo.git", "log", "-1", "--format=%s", "main"); strings.TrimSpace(got) != "more" {
		t.Errorf("the push did not land: %q", got)
	}
	if hit := grepTree(t, base, token); hit != "" {
		t.Errorf("the token is in %s", hit)
	}
	t.Logf("git through the gateway: clone and push; %d requests the git server refused (git's first, credential-less tries)", denied)
}
