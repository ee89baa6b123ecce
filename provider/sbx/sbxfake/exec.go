package sbxfake

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/d10ffeed/corral/provider/local"
)

// defaultPath is PATH in a sandbox's default environment.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func (f *fake) exec(args []string) int {
	fl, pos, err := parseFlags(args, map[string]bool{"d": false, "detach": false, "i": false, "interactive": false,
		"t": false, "tty": false, "e": true, "env": true, "env-file": true, "u": true, "user": true,
		"w": true, "workdir": true, "privileged": false, "detach-keys": true}, false)
	if err != nil {
		return f.fail("%v", err)
	}
	if len(pos) < 2 {
		return f.fail("\"sbx exec\" requires at least 2 arg(s), only received %d", len(pos))
	}
	name, argv := pos[0], pos[1:]
	r, err := load(f.state, name)
	if err != nil {
		return f.notFound(name)
	}
	if r.Status != "running" {
		// A stopped sandbox is started first.
		r.Status = "running"
		if err := save(f.state, r); err != nil {
			return f.fail("%v", err)
		}
	}
	dir := sandboxDir(f.state, name)
	env := map[string]string{"PATH": defaultPath, "HOME": filepath.Join(dir, "home"), "LANG": "C.UTF-8",
		local.SandboxIDEnv: dir}
	order := []string{"PATH", "HOME", "LANG", local.SandboxIDEnv}
	set := func(k, v string) {
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	for _, file := range fl["env-file"] {
		kvs, err := parseEnvFile(file)
		if err != nil {
			return f.fail("%v", err)
		}
		for _, kv := range kvs {
			k, v, _ := strings.Cut(kv, "=")
			set(k, v)
		}
	}
	for _, e := range append(fl["e"], fl["env"]...) {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			if v, ok = os.LookupEnv(k); !ok {
				continue
			}
		}
		set(k, v)
	}
	environ := make([]string, 0, len(order))
	for _, k := range order {
		environ = append(environ, k+"="+env[k])
	}
	wd := fl.first("w", "workdir")
	if wd == "" && len(r.Workspaces) > 0 {
		wd = r.Workspaces[0]
	}
	if wd == "" {
		wd = "/"
	}
	if fi, err := os.Stat(wd); err != nil || !fi.IsDir() {
		fmt.Fprintf(f.stderr, "OCI runtime exec failed: exec failed: unable to start container process: chdir to cwd (%q) set in config.json failed: no such file or directory: unknown\n", wd)
		return 126
	}
	prog, err := local.LookPath(argv[0], environ)
	if err != nil {
		fmt.Fprintf(f.stderr, "OCI runtime exec failed: exec failed: unable to start container process: exec: %q: executable file not found in $PATH: unknown\n", argv[0])
		return 127
	}
	c := &exec.Cmd{Path: prog, Args: argv, Env: environ, Dir: wd, SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	// The command gets this process's descriptors: its output reaches the
	// client as it is written, and a command that outlives this process
	// (killed, or -d) keeps writing where it did.
	c.Stdout, c.Stderr = os.Stdout, os.Stderr
	if fl.has("i") || fl.has("interactive") {
		c.Stdin = os.Stdin
	}
	if err := c.Start(); err != nil {
		fmt.Fprintf(f.stderr, "OCI runtime exec failed: exec failed: unable to start container process: %v: unknown\n", err)
		return 126
	}
	if fl.has("d") || fl.has("detach") {
		_ = c.Process.Release()
		return 0
	}
	err = c.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if err != nil {
		return f.fail("%v", err)
	}
	return 0
}

// parseEnvFile reads a docker env file: KEY=VALUE lines, # comments,
// blank lines skipped, a bare KEY passed through from this environment,
// valid UTF-8 only (docker's opts.ParseEnvFile rules).
func parseEnvFile(path string) ([]string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var out []string
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for n := 1; sc.Scan(); n++ {
		b := sc.Bytes()
		if !utf8.Valid(b) {
			return nil, fmt.Errorf("env file %s contains invalid utf8 bytes at line %d", path, n)
		}
		line := strings.TrimLeftFunc(string(b), unicode.IsSpace)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if k == "" {
			return nil, fmt.Errorf("invalid environment variable: %s", line)
		}
		if strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("variable '%s' contains whitespaces", k)
		}
		if !ok {
			if v, ok = os.LookupEnv(k); !ok {
				continue
			}
		}
		out = append(out, k+"="+v)
	}
	return out, sc.Err()
}

func (f *fake) rm(args []string) int {
	fl, pos, err := parseFlags(args, map[string]bool{"f": false, "force": false, "all": false}, true)
	if err != nil {
		return f.fail("%v", err)
	}
	if fl.has("all") {
		for _, r := range f.all() {
			pos = append(pos, r.Name)
		}
	}
	if len(pos) == 0 {
		return f.fail("requires at least one sandbox name (or --all)")
	}
	lp, err := local.New(local.Options{BaseDir: filepath.Join(f.state, "sandboxes"), KillGrace: 200 * time.Millisecond})
	if err != nil {
		return f.fail("%v", err)
	}
	code := 0
	for _, name := range pos {
		if _, err := load(f.state, name); err != nil {
			code = f.notFound(name)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := lp.Destroy(ctx, sandboxDir(f.state, name))
		cancel()
		if err != nil {
			code = f.fail("removing sandbox %q: %v", name, err)
		}
	}
	return code
}

func (f *fake) policy(args []string) int {
	if len(args) == 0 {
		return f.fail("requires a subcommand: allow, deny, ls, rm, reset, init")
	}
	switch args[0] {
	case "allow", "deny":
	default:
		return f.fail("unknown command %q for \"sbx policy\"", args[0])
	}
	decision := args[0]
	if len(args) < 2 || args[1] != "network" {
		return f.fail("\"sbx policy %s\" requires a subcommand: network", decision)
	}
	fl, pos, err := parseFlags(args[2:], map[string]bool{"sandbox": true, "g": false, "global": false}, true)
	if err != nil {
		return f.fail("%v", err)
	}
	if len(pos) != 1 {
		return f.fail("\"sbx policy %s network\" accepts 1 arg(s), received %d", decision, len(pos))
	}
	var res []string
	for _, r := range strings.Split(pos[0], ",") {
		r = strings.TrimSpace(r)
		if r == "" || strings.ContainsAny(r, " \t\n") {
			return f.fail("invalid network resource %q", r)
		}
		res = append(res, r)
	}
	rule := Rule{Decision: decision, Resources: res}
	if name := fl.get("sandbox"); name != "" {
		r, err := load(f.state, name)
		if err != nil {
			return f.notFound(name)
		}
		r.Policies = append(r.Policies, rule)
		if err := save(f.state, r); err != nil {
			return f.fail("%v", err)
		}
		return 0
	}
	fh, err := os.OpenFile(filepath.Join(f.state, "global-policy.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return f.fail("%v", err)
	}
	defer fh.Close()
	fmt.Fprintf(fh, "%s %s\n", decision, strings.Join(res, ","))
	return 0
}

func (f *fake) ports(args []string) int {
	fl, pos, err := parseFlags(args, map[string]bool{"publish": true, "unpublish": true, "json": false}, true)
	if err != nil {
		return f.fail("%v", err)
	}
	if len(pos) != 1 {
		return f.fail("\"sbx ports\" accepts 1 arg(s), received %d", len(pos))
	}
	r, err := load(f.state, pos[0])
	if err != nil {
		return f.notFound(pos[0])
	}
	for _, spec := range fl["publish"] {
		p, err := parsePortSpec(spec)
		if err != nil {
			return f.fail("%v", err)
		}
		dup := false
		for _, q := range r.Ports {
			dup = dup || q == p
		}
		if !dup {
			r.Ports = append(r.Ports, p)
		}
	}
	for _, spec := range fl["unpublish"] {
		p, err := parsePortSpec(spec)
		if err != nil {
			return f.fail("%v", err)
		}
		kept := r.Ports[:0]
		for _, q := range r.Ports {
			if q.SandboxPort != p.SandboxPort || q.HostPort != p.HostPort {
				kept = append(kept, q)
			}
		}
		r.Ports = kept
	}
	if len(fl["publish"])+len(fl["unpublish"]) > 0 {
		if r.Status != "running" {
			r.Status = "running" // publishing starts a stopped sandbox
		}
		if err := save(f.state, r); err != nil {
			return f.fail("%v", err)
		}
		return 0
	}
	if fl.has("json") {
		f.banner()
		b, _ := jsonMarshal(r.Ports)
		fmt.Fprintln(f.stdout, string(b))
		return 0
	}
	for _, p := range r.Ports {
		fmt.Fprintf(f.stdout, "%s:%d->%d/%s\n", p.HostIP, p.HostPort, p.SandboxPort, p.Protocol)
	}
	return 0
}

// parsePortSpec parses [[HOST_IP:]HOST_PORT:]SANDBOX_PORT[/PROTOCOL].
func parsePortSpec(spec string) (Port, error) {
	p := Port{HostIP: "127.0.0.1", Protocol: "tcp"}
	s, proto, ok := strings.Cut(spec, "/")
	if ok {
		p.Protocol = proto
	}
	parts := strings.Split(s, ":")
	num := func(v string) (int, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 65535 {
			return 0, fmt.Errorf("invalid port spec %q", spec)
		}
		return n, nil
	}
	var err error
	switch len(parts) {
	case 1:
		if p.SandboxPort, err = num(parts[0]); err != nil {
			return p, err
		}
		p.HostPort = p.SandboxPort
	case 2:
		if p.HostPort, err = num(parts[0]); err != nil {
			return p, err
		}
		if p.SandboxPort, err = num(parts[1]); err != nil {
			return p, err
		}
	case 3:
		p.HostIP = parts[0]
		if p.HostPort, err = num(parts[1]); err != nil {
			return p, err
		}
		if p.SandboxPort, err = num(parts[2]); err != nil {
			return p, err
		}
	default:
		return p, fmt.Errorf("invalid port spec %q", spec)
	}
	return p, nil
}
