// Package sbxfake is a fake of the Docker Sandboxes CLI (`sbx`) for tests:
// a real program (Build compiles cmd/sbx) that answers the verbs corral's
// sbx provider uses with the argument layouts, JSON shapes, messages and
// exit codes of the real CLI (docs.docker.com/reference/cli/sbx), with
// real host processes behind `sbx exec`.
//
// State lives under the directory SBXFAKE_STATE names: one directory per
// sandbox (sandboxes/<name>, holding sandbox.json and the processes' HOME),
// calls.log (one JSON argument list per invocation, so a test can show a
// secret never reached argv), and the switches SetLoggedOut and SetBanner
// flip.
//
// Verbs (flags as the real CLI takes them; unknown flags are an error, as
// cobra's "unknown flag"):
//
//   - version
//   - ls [--json] [-q]: {"sandboxes":[{"name","agent","status","ports",
//     "workspaces"}]}; status is "stopped" after create and "running" once
//     an exec started it (a stopped sandbox starts on exec, as documented)
//   - create [--name N] [-q] [--cpus N] [-m M] [-t IMAGE] [--branch B]
//     [--clone] AGENT PATH [PATH...]: the first PATH is the workspace, which
//     the real CLI mounts at the same path inside the VM; here commands run
//     on the host, so it is the same directory
//   - exec [-d] [-i] [-t] [-e K[=V]]... [--env-file F]... [-u U] [-w DIR]
//     [--privileged] SANDBOX CMD [ARG...]: flags only before the name (after
//     it they are the command's), as docker exec. The command runs in a new
//     session (it leads its process group), with a default environment
//     (PATH, HOME, LANG, CORRAL_SANDBOX_ID=<sandbox dir>) laid over by the
//     env files and -e, in order; -e K alone passes the client's K through.
//     The exit status is the command's (126: cannot enter -w or execute,
//     127: not found, 128+N: signal N). Killing the client does not kill
//     the command (no signal proxy without a TTY, as docker exec).
//   - rm [-f] [--all] SANDBOX...: kills every process of the sandbox (its
//     marker, through provider/local) and deletes its state; the workspace
//     (a host directory) stays
//   - policy allow|deny network [--sandbox S] RESOURCES: RESOURCES is
//     comma-separated; rules are recorded on the sandbox (or globally), not
//     enforced (the fake's processes are host processes)
//   - ports SANDBOX [--publish SPEC]... [--unpublish SPEC]... [--json]:
//     SPEC is [[HOST_IP:]HOST_PORT:]SANDBOX_PORT[/PROTO]; the host port is
//     the sandbox port when not given (the fake's sandbox is the host)
//   - stop SANDBOX
//
// A sandbox that does not exist is `ERROR: sandbox "<name>" not found`,
// exit 1; a host verb while logged out is `ERROR: not logged in, run 'sbx
// login'`, exit 1.
package sbxfake

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// StateEnv names the variable that holds the fake's state directory.
const StateEnv = "SBXFAKE_STATE"

const (
	callsLog      = "calls.log"
	loggedOutFile = "logged-out"
	bannerFile    = "banner"
	recordFile    = "sandbox.json"
)

// Record is the fake's state of one sandbox.
type Record struct {
	Name       string    `json:"name"`
	Agent      string    `json:"agent"`
	Status     string    `json:"status"`
	Workspaces []string  `json:"workspaces"`
	Ports      []Port    `json:"ports"`
	Policies   []Rule    `json:"policies"`
	CPUs       string    `json:"cpus,omitempty"`
	Memory     string    `json:"memory,omitempty"`
	Template   string    `json:"template,omitempty"`
	Created    time.Time `json:"created"`
}

// Port is one published port, as `sbx ports --json` lists it.
type Port struct {
	HostIP      string `json:"host_ip"`
	HostPort    int    `json:"host_port"`
	SandboxPort int    `json:"sandbox_port"`
	Protocol    string `json:"protocol"`
}

// Rule is one network policy rule the fake recorded.
type Rule struct {
	Decision  string   `json:"decision"`
	Resources []string `json:"resources"`
}

type fake struct {
	state  string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
}

// Main runs the fake with args (without the program name) and returns its
// exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	f := &fake{state: os.Getenv(StateEnv), stdin: stdin, stdout: stdout, stderr: stderr}
	if f.state == "" {
		fmt.Fprintf(stderr, "sbxfake: %s is not set\n", StateEnv)
		return 2
	}
	if err := os.MkdirAll(filepath.Join(f.state, "sandboxes"), 0o755); err != nil {
		fmt.Fprintf(stderr, "sbxfake: %v\n", err)
		return 2
	}
	f.logCall(args)
	// Global flags.
	for len(args) > 0 && (args[0] == "-D" || args[0] == "--debug") {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "Usage: sbx COMMAND")
		return 1
	}
	verb, rest := args[0], args[1:]
	if verb != "version" && verb != "exec" && f.exists(loggedOutFile) {
		return f.fail("not logged in, run 'sbx login'")
	}
	switch verb {
	case "version":
		fmt.Fprintln(stdout, "sbx version: v0.0.0-fake")
		return 0
	case "ls":
		return f.ls(rest)
	case "create":
		return f.create(rest)
	case "exec":
		if f.exists(loggedOutFile) {
			return f.fail("not logged in, run 'sbx login'")
		}
		return f.exec(rest)
	case "rm":
		return f.rm(rest)
	case "policy":
		return f.policy(rest)
	case "ports":
		return f.ports(rest)
	case "stop":
		return f.stop(rest)
	}
	return f.fail("unknown command %q for \"sbx\"", verb)
}

func (f *fake) fail(format string, args ...any) int {
	fmt.Fprintf(f.stderr, "ERROR: "+format+"\n", args...)
	return 1
}

func (f *fake) notFound(name string) int { return f.fail("sandbox %q not found", name) }

func (f *fake) exists(name string) bool {
	_, err := os.Stat(filepath.Join(f.state, name))
	return err == nil
}

func (f *fake) logCall(args []string) {
	b, _ := json.Marshal(args)
	fh, err := os.OpenFile(filepath.Join(f.state, callsLog), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	_, _ = fh.Write(append(b, '\n'))
	_ = fh.Close()
}

func (f *fake) banner() {
	if f.exists(bannerFile) {
		fmt.Fprintln(f.stdout, "sandboxd: daemon started (fake banner)")
	}
}

func sandboxDir(state, name string) string { return filepath.Join(state, "sandboxes", name) }

func load(state, name string) (Record, error) {
	var r Record
	if !validName(name) {
		return r, os.ErrNotExist
	}
	b, err := os.ReadFile(filepath.Join(sandboxDir(state, name), recordFile))
	if err != nil {
		return r, err
	}
	err = json.Unmarshal(b, &r)
	return r, err
}

func save(state string, r Record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	dir := sandboxDir(state, r.Name)
	tmp, err := os.CreateTemp(dir, ".rec*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, recordFile))
}

// validName is the CLI's rule for --name: letters, numbers, hyphens,
// periods, plus signs.
func validName(n string) bool {
	if n == "" || n == "." || n == ".." {
		return false
	}
	for _, c := range n {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == '+', c == '_':
		default:
			return false
		}
	}
	return true
}

func (f *fake) all() []Record {
	ents, _ := os.ReadDir(filepath.Join(f.state, "sandboxes"))
	var out []Record
	for _, e := range ents {
		if r, err := load(f.state, e.Name()); err == nil {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (f *fake) ls(args []string) int {
	fl, pos, err := parseFlags(args, map[string]bool{"json": false, "q": false, "quiet": false}, true)
	if err != nil {
		return f.fail("%v", err)
	}
	if len(pos) > 0 {
		return f.fail("unknown command %q for \"sbx ls\"", pos[0])
	}
	list := f.all()
	switch {
	case fl.has("json"):
		type entry struct {
			Name       string   `json:"name"`
			Agent      string   `json:"agent"`
			Status     string   `json:"status"`
			Ports      []string `json:"ports"`
			Workspaces []string `json:"workspaces"`
		}
		out := struct {
			Sandboxes []entry `json:"sandboxes"`
		}{Sandboxes: []entry{}}
		for _, r := range list {
			ports := []string{}
			for _, p := range r.Ports {
				ports = append(ports, fmt.Sprintf("%s:%d->%d/%s", p.HostIP, p.HostPort, p.SandboxPort, p.Protocol))
			}
			out.Sandboxes = append(out.Sandboxes, entry{Name: r.Name, Agent: r.Agent, Status: r.Status, Ports: ports, Workspaces: r.Workspaces})
		}
		f.banner()
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Fprintln(f.stdout, string(b))
	case fl.has("q") || fl.has("quiet"):
		for _, r := range list {
			fmt.Fprintln(f.stdout, r.Name)
		}
	default:
		fmt.Fprintf(f.stdout, "%-30s %-10s %-10s %s\n", "SANDBOX", "AGENT", "STATUS", "WORKSPACE")
		for _, r := range list {
			fmt.Fprintf(f.stdout, "%-30s %-10s %-10s %s\n", r.Name, r.Agent, r.Status, strings.Join(r.Workspaces, ","))
		}
	}
	return 0
}

var agents = map[string]bool{"shell": true, "claude": true, "codex": true, "gemini": true, "copilot": true, "docker-agent": true, "kiro": true, "opencode": true, "cagent": true}

func (f *fake) create(args []string) int {
	fl, pos, err := parseFlags(args, map[string]bool{"name": true, "q": false, "quiet": false, "cpus": true,
		"m": true, "memory": true, "t": true, "template": true, "branch": true, "clone": false, "kit": true}, true)
	if err != nil {
		return f.fail("%v", err)
	}
	if len(pos) == 0 {
		return f.fail("requires an agent: sbx create AGENT PATH")
	}
	agent := pos[0]
	if !agents[agent] {
		return f.fail("unknown command %q for \"sbx create\"", agent)
	}
	paths := pos[1:]
	if len(paths) == 0 {
		return f.fail("\"sbx create %s\" requires at least 1 arg(s), only received 0", agent)
	}
	var ws []string
	for _, p := range paths {
		p = strings.TrimSuffix(p, ":ro")
		abs, err := filepath.Abs(p)
		if err != nil {
			return f.fail("%v", err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return f.fail("workspace %q does not exist or is not a directory", p)
		}
		ws = append(ws, abs)
	}
	name := fl.get("name")
	if name == "" {
		name = agent + "-" + filepath.Base(ws[0])
	}
	if !validName(name) {
		return f.fail("invalid sandbox name %q: letters, numbers, hyphens, periods and plus signs only", name)
	}
	dir := sandboxDir(f.state, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		if os.IsExist(err) {
			return f.fail("sandbox %q already exists", name)
		}
		return f.fail("%v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "home"), 0o755); err != nil {
		return f.fail("%v", err)
	}
	r := Record{Name: name, Agent: agent, Status: "stopped", Workspaces: ws, Ports: []Port{}, Policies: []Rule{},
		CPUs: fl.get("cpus"), Memory: fl.first("m", "memory"), Template: fl.first("t", "template"), Created: time.Now().UTC()}
	if err := save(f.state, r); err != nil {
		return f.fail("%v", err)
	}
	if !fl.has("q") && !fl.has("quiet") {
		fmt.Fprintf(f.stdout, "Created sandbox %s\n", name)
	}
	return 0
}

func (f *fake) stop(args []string) int {
	_, pos, err := parseFlags(args, map[string]bool{}, true)
	if err != nil {
		return f.fail("%v", err)
	}
	for _, name := range pos {
		r, err := load(f.state, name)
		if err != nil {
			return f.notFound(name)
		}
		r.Status = "stopped"
		if err := save(f.state, r); err != nil {
			return f.fail("%v", err)
		}
	}
	return 0
}

func jsonMarshal(v any) ([]byte, error) { return json.MarshalIndent(v, "", "  ") }
