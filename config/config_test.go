package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/d10ffeed/corral/config"
	"github.com/d10ffeed/corral/sandbox"
)

const full = `id: app
provider:
  name: local
workspace:
  source: {git: file:///srv/app.git, ref: main, depth: full}
  setup:
    - npm ci
    - parallel: [npm run build, npm run lint]
  scripts: {test: npm test}
  instructions: Be careful.
  skills:
    - {path: docs/x.md, content: hi}
  secrets:
    TOKEN: {env: CORRAL_T_TOKEN}
policy:
  commands: {allow: [npm test], deny: ["rm -rf *"]}
  network: deny
lifecycle: {reuse: none, snapshot: none, snapshotMaxAge: 24h, keepAlive: 30m, destroyOnComplete: true, keepBackground: true,
  idle: {pause: 10m, destroy: 30m, approvalWait: 72h}, checkpoint: after-run, checkpointKeep: 5, checkpointMaxAge: 720h}
`

func TestFullConfig(t *testing.T) {
	f, err := config.Parse([]byte(full))
	if err != nil {
		t.Fatal(err)
	}
	def, err := f.Definition(config.BuildOptions{Getenv: func(k string) (string, bool) {
		if k == "CORRAL_T_TOKEN" {
			return "s3cret", true
		}
		return "", false
	}})
	if err != nil {
		t.Fatal(err)
	}
	if def.ID != "app" || def.Provider.Name() != "local" {
		t.Errorf("def = %+v", def)
	}
	ws := def.Workspace
	if ws.Source.Git != "file:///srv/app.git" || ws.Source.Depth != "full" || len(ws.Setup) != 2 || len(ws.Setup[1].Parallel) != 2 {
		t.Errorf("workspace = %+v", ws)
	}
	if v, _ := ws.Secrets.Value("TOKEN"); v != "s3cret" {
		t.Error("secret not resolved")
	}
	if def.Policy.Network != sandbox.Deny || def.Policy.EvaluateCommand("npm test", nil) != sandbox.Allow {
		t.Errorf("policy = %+v", def.Policy)
	}
	lc := def.Lifecycle
	if lc.Reuse != sandbox.ReuseNone || lc.KeepAlive != 30*time.Minute || lc.SnapshotMaxAge != 24*time.Hour || !lc.DestroyOnComplete || !lc.KeepBackground {
		t.Errorf("lifecycle = %+v", lc)
	}
	if lc.Checkpoint != sandbox.CheckpointAfterRun || lc.CheckpointKeep != 5 || lc.CheckpointMaxAge != 720*time.Hour {
		t.Errorf("lifecycle checkpoint = %q keep %d max age %s", lc.Checkpoint, lc.CheckpointKeep, lc.CheckpointMaxAge)
	}
	if lc.Idle != (sandbox.Idle{Pause: 10 * time.Minute, Destroy: 30 * time.Minute, ApprovalWait: 72 * time.Hour}) {
		t.Errorf("lifecycle.idle = %+v", lc.Idle)
	}
}

func TestEmptyConfigIsTheDefault(t *testing.T) {
	f, err := config.Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	def, err := f.Definition(config.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if def.ID != config.DefaultID || def.Provider.Name() != "local" || def.Workspace != nil {
		t.Errorf("default definition = %+v", def)
	}
}

func TestErrorsNameKeyAndLine(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown top-level key", "id: x\nbogus: 1\n", []string{"line 2", `unknown key "bogus"`}},
		{"unknown nested key", "workspace:\n  setup: [a]\n  sorce: {}\n", []string{"line 3", `unknown key "sorce"`}},
		{"bad reuse", "lifecycle:\n  reuse: sometimes\n", []string{"line 2", "lifecycle.reuse", `"sometimes"`}},
		{"bad duration", "lifecycle:\n  keepAlive: forever\n", []string{"line 2", `bad duration "forever"`}},
		{"bad idle duration", "lifecycle:\n  idle:\n    pause: -5m\n", []string{"line 3", `bad duration "-5m"`}},
		{"unknown idle key", "lifecycle:\n  idle:\n    pause: 5m\n    destory: 1h\n", []string{"line 4", "lifecycle.idle", `unknown key "destory"`}},
		{"idle not a mapping", "lifecycle:\n  idle: 10m\n", []string{"line 2", "lifecycle.idle", "mapping"}},
		{"bad decision", "policy:\n  network: maybe\n", []string{"line 2", `"maybe"`}},
		{"bad depth", "workspace:\n  source: {git: x/y, depth: -3}\n", []string{"line 2", "source.depth"}},
		{"bad setup", "workspace:\n  setup:\n    - {paralel: [a]}\n", []string{"line 3", `unknown key "paralel"`}},
		{"bad type", "provider:\n  docker:\n    ports: lots\n", []string{"line 3", "bad value"}},
		{"bad cpus", "provider:\n  docker:\n    cpus: lots\n", []string{"line 3", "provider.docker.cpus", `bad CPU limit "lots"`}},
		{"bad memory", "provider:\n  docker:\n    memory: 2 bananas\n", []string{"line 3", "provider.docker.memory", "bad memory limit"}},
		{"tiny memory", "provider:\n  docker:\n    memory: 1m\n", []string{"line 3", "below the engine's minimum"}},
		{"bad pids", "provider:\n  docker:\n    pidsLimit: [1]\n", []string{"line 3", "provider.docker.pidsLimit"}},
		{"empty memory", "provider:\n  docker:\n    memory: \"\"\n", []string{"line 3", "provider.docker.memory", "0 or unlimited"}},
		{"bad yaml", "id: [\n", []string{"line"}},
		{"unknown docker key", "provider:\n  name: docker\n  docker:\n    image: x\n    imgae: y\n", []string{"line 5", "provider.docker", `unknown key "imgae"`}},
		{"unknown local key", "provider:\n  local: {basedir: x}\n", []string{"line 2", "provider.local", `unknown key "basedir"`}},
		{"unknown provider section", "provider:\n  name: vm\n  vm: {cpus: 2}\n", []string{"line 3", `unknown key "vm"`, "docker, local"}},
		{"docker section not a mapping", "provider:\n  docker: node:22\n", []string{"line 2", "provider.docker", "mapping"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestBuildErrors(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		want       []string
	}{
		{"unset secret", "workspace:\n  secrets:\n    TOKEN: {env: CORRAL_T_UNSET_VAR}\n", []string{"line 3", "TOKEN", "CORRAL_T_UNSET_VAR is not set"}},
		{"unknown provider", "provider: {name: vm}\n", []string{`unknown provider "vm"`}},
		{"docker without image", "provider: {name: docker}\n", []string{"provider.docker.image is required"}},
		{"unknown token secret", "workspace:\n  source: {git: x/y, tokenSecret: NOPE}\n", []string{`unknown secret "NOPE"`}},
		{"dash value", "workspace:\n  source: {git: --upload-pack=x}\n", []string{"starts with '-'"}},
		{"unknown retention", "retention: forever\n", []string{`retention "forever"`, "all, sandbox or none"}},
		{"idle pause after destroy", "lifecycle:\n  idle: {pause: 2h, destroy: 1h}\n", []string{"line 2", "idle.pause", "shorter"}},
		{"idle destroy and keepAlive disagree", "lifecycle:\n  keepAlive: 30m\n  idle: {destroy: 1h}\n", []string{"line 3", "keepAlive", "idle.destroy"}},
		{"idle pause after keepAlive", "lifecycle:\n  keepAlive: 30m\n  idle: {pause: 30m}\n", []string{"line 3", "idle.pause"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := config.Parse([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Definition(config.BuildOptions{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestLoadRelativePaths(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "corral.yaml")
	if err := os.WriteFile(p, []byte("workspace:\n  source: {dir: src}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	def, err := f.Definition(config.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := def.Workspace.Source.Dir; got != filepath.Join(dir, "src") {
		t.Errorf("source dir %q, want it relative to the config file", got)
	}
	if _, err := config.Load(filepath.Join(dir, "nope.yaml")); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("missing file: %v", err)
	}
}

func TestMCPServers(t *testing.T) {
	const doc = `workspace:
  mcpServers:
    - {name: docs, url: "https://docs.example/mcp", headers: {Authorization: "Bearer ${secret:DOCS}"}}
    - {name: fs, command: npx, args: [-y, fs-mcp], env: {ROOT: /workspace}}
  secrets:
    DOCS: {env: CORRAL_T_DOCS}
`
	getenv := func(k string) (string, bool) { return "d0cs", k == "CORRAL_T_DOCS" }
	f, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	def, err := f.Definition(config.BuildOptions{Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	got := def.Workspace.MCPServers
	if len(got) != 2 || got[0].Headers["Authorization"] != "Bearer ${secret:DOCS}" || got[1].Command != "npx" || got[1].Env["ROOT"] != "/workspace" {
		t.Errorf("servers = %+v", got)
	}
	for name, bad := range map[string]string{
		"UnknownSecret": "workspace:\n  mcpServers:\n    - {name: a, url: http://h, headers: {X: \"${secret:NOPE}\"}}\n",
		"UnknownKey":    "workspace:\n  mcpServers:\n    - {name: a, url: http://h, token: x}\n",
		"NoTransport":   "workspace:\n  mcpServers:\n    - {name: a}\n",
	} {
		t.Run(name, func(t *testing.T) {
			f, err := config.Parse([]byte(bad))
			if err == nil {
				_, err = f.Definition(config.BuildOptions{Getenv: getenv})
			}
			if err == nil || !strings.Contains(err.Error(), "mcpServers") && !strings.Contains(err.Error(), `"token"`) {
				t.Errorf("err = %v", err)
			}
		})
	}
}

func TestRetention(t *testing.T) {
	for _, mode := range []string{"all", "sandbox", "none"} {
		f, err := config.Parse([]byte("retention: " + mode + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		def, err := f.Definition(config.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if def.Retention != mode {
			t.Errorf("retention %s: definition has %q", mode, def.Retention)
		}
	}
}
