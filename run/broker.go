package run

import (
	"bytes"
	"maps"
	"net/url"
	"strconv"
	"strings"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/journal"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// Broker is the egress gateway as the runner sees it (package gateway
// implements it): it mints the placeholders a run's agent gets instead of
// its brokered secrets, and says where the sandbox reaches the gateway.
type Broker interface {
	// Placeholder returns the run's placeholder for the named brokered
	// secret.
	Placeholder(run store.Run, name string) string
	// BaseURL returns the URL through which an agent in a sandbox of the
	// provider reaches upstream (a broker host) for the run; an error
	// when that provider's sandboxes cannot reach the gateway.
	BaseURL(provider, runID, upstream string) (string, error)
	// EgressProxy returns the forward-proxy URL (credentials included)
	// that an agent in a sandbox of the provider uses under an egress
	// allow-list, for the run.
	EgressProxy(provider string, run store.Run) (string, error)
	// CACert returns the PEM certificate of the CA with which the gateway
	// intercepts HTTPS for the run's sandbox (sandbox.Broker.Intercept).
	CACert(run store.Run) ([]byte, error)
}

// checkEgress refuses an egress allow-list that nothing would enforce: a
// provider that cannot keep the sandbox off the network but through the
// gateway, or a runner without a gateway.
func (r *Runner) checkEgress(def *sandbox.Definition, id string) error {
	if len(def.Policy.EgressList()) == 0 {
		return nil
	}
	var ne sandbox.NativeEgress
	if sandbox.ProviderAs(def.Provider, &ne) {
		// The backend's own rules; no gateway needed.
		return ne.NativeEgress(def.Policy.EgressList())
	}
	var e sandbox.EgressEnforcer
	if !sandbox.ProviderAs(def.Provider, &e) || !e.EnforcesEgress() {
		return sandbox.Errorf(sandbox.FailedPrecondition, "run.start", id, "policy.network.allow: the %s provider cannot enforce an egress allow-list; refusing rather than run open", def.Provider.Name())
	}
	if r.opts.Broker == nil {
		return sandbox.Errorf(sandbox.FailedPrecondition, "run.start", id, "policy.network.allow needs the egress gateway (run it in the daemon, or give run.Options.Broker)")
	}
	return nil
}

// egressEnv points the agent's HTTP clients at the gateway's forward
// proxy when the policy has an egress allow-list.
func (d *driver) egressEnv(env map[string]string) (map[string]string, error) {
	var ne sandbox.NativeEgress
	if len(d.def.Policy.EgressList()) == 0 || sandbox.ProviderAs(d.def.Provider, &ne) {
		return env, nil
	}
	if d.r.opts.Broker == nil {
		return nil, errNoBroker(d.run.ID)
	}
	u, err := d.r.opts.Broker.EgressProxy(d.def.Provider.Name(), d.run)
	if err != nil {
		return nil, err
	}
	env = maps.Clone(env)
	if env == nil {
		env = map[string]string{}
	}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"} {
		env[k] = u
	}
	env["NO_PROXY"], env["no_proxy"] = "", ""
	return env, nil
}

// Brokered describes what a run's brokered secrets become: the names and,
// per name, the hosts the value may reach. Empty without brokered secrets.
type Brokered struct {
	Names []string
	Hosts map[string][]string
}

// BrokeredOf lists the definition's brokered secrets and their hosts, for
// a run's start notice.
func BrokeredOf(def *sandbox.Definition) Brokered {
	s := def.Workspace.SecretsOrEmpty()
	b := Brokered{Names: s.Brokered(), Hosts: map[string][]string{}}
	for _, n := range b.Names {
		br, _ := s.Broker(n)
		b.Hosts[n] = br.Hosts
	}
	return b
}

// runSecrets returns the secrets and environment the run's agent gets:
// brokered secrets as placeholders (in the secrets the harness reads and
// in the environment under their names), and each one's base URL variable (when
// the broker has one and the request does not set it) pointing at the
// gateway's route to its first host. Without brokered secrets it returns
// them unchanged.
func (d *driver) runSecrets(env map[string]string) (sandbox.Secrets, map[string]string, error) {
	fallback := fallbackNames(d.run)
	secrets := d.secrets().WithoutBrokers(fallback)
	names := secrets.Brokered()
	if len(names)+len(fallback) == 0 {
		return secrets, env, nil
	}
	env = maps.Clone(env)
	if env == nil {
		env = map[string]string{}
	}
	for _, n := range fallback {
		// As without a broker (the start notice said so): the value under
		// the secret's name.
		env[n], _ = secrets.Value(n)
	}
	if len(names) == 0 {
		return secrets, env, nil
	}
	b := d.r.opts.Broker
	if b == nil {
		return sandbox.Secrets{}, nil, errNoBroker(d.run.ID)
	}
	for _, n := range names {
		// The placeholder stands where the value would: in the agent's
		// environment under the secret's name.
		env[n] = b.Placeholder(d.run, n)
		br, _ := secrets.Broker(n)
		// A sandbox that cannot reach the gateway refuses the run, base
		// URL variable or not: its placeholder would be worthless.
		u, err := b.BaseURL(d.def.Provider.Name(), d.run.ID, br.Hosts[0])
		if err != nil {
			return sandbox.Secrets{}, nil, err
		}
		v := br.BaseURLVar(n)
		if v == "" {
			continue
		}
		if _, set := env[v]; set {
			continue
		}
		env[v] = u
	}
	if err := d.gitThroughGateway(env, secrets, names); err != nil {
		return sandbox.Secrets{}, nil, err
	}
	if err := d.interception(env, secrets, names); err != nil {
		return sandbox.Secrets{}, nil, err
	}
	return secrets.WithPlaceholders(func(name string) string { return b.Placeholder(d.run, name) }), env, nil
}

// gitThroughGateway sends git over HTTPS to the hosts of basic-auth
// brokered secrets through the gateway: git's per-process configuration
// (GIT_CONFIG_COUNT, set for the agent only) rewrites each host's URLs to
// the gateway's route (url.<route>/.insteadOf) and names a credential
// helper that answers with the placeholder from the secret's variable; the
// gateway swaps it for the value in the Basic header. A run whose
// environment sets GIT_CONFIG_COUNT itself is left alone.
func (d *driver) gitThroughGateway(env map[string]string, secrets sandbox.Secrets, names []string) error {
	if _, set := env["GIT_CONFIG_COUNT"]; set {
		return nil
	}
	n := 0
	for _, name := range names {
		br, _ := secrets.Broker(name)
		if !strings.EqualFold(br.Header, sandbox.BrokerBasic) {
			continue
		}
		for _, h := range br.Hosts {
			scheme, host, err := sandbox.SplitBrokerHost(h)
			if err != nil {
				return err
			}
			route, err := d.r.opts.Broker.BaseURL(d.def.Provider.Name(), d.run.ID, h)
			if err != nil {
				return err
			}
			u, err := url.Parse(route)
			if err != nil {
				return sandbox.Wrap(sandbox.Internal, "run.start", d.run.ID, err)
			}
			set := func(key, value string) {
				k := strconv.Itoa(n)
				env["GIT_CONFIG_KEY_"+k], env["GIT_CONFIG_VALUE_"+k] = key, value
				n++
			}
			set("url."+route+"/.insteadOf", scheme+"://"+host+"/")
			// Credentials by path: each route gets its own helper.
			set("credential."+u.Scheme+"://"+u.Host+".useHttpPath", "true")
			// The helper names the variable, never a value.
			set("credential."+route+"/.helper", `!f() { test "$1" = get && printf 'username=x-access-token\npassword=%s\n' "$`+name+`"; }; f`)
		}
	}
	if n > 0 {
		env["GIT_CONFIG_COUNT"] = strconv.Itoa(n)
	}
	return nil
}

func errNoBroker(id string) error {
	return sandbox.Errorf(sandbox.FailedPrecondition, "run.start", id, "the definition has brokered secrets but this runner has no egress gateway (run it in the daemon, or give run.Options.Broker)")
}

// NoteEgress records an egress attempt of a run as an egress.attempt
// event, when this process drives the run and is not replaying its
// journal; it reports whether the attempt was taken. The gateway's log
// line records every attempt either way.
func (r *Runner) NoteEgress(runID string, e event.Egress) bool {
	d := r.driving(runID)
	if d == nil {
		return false
	}
	select {
	case d.egress <- e:
		return true
	default:
		return false
	}
}

// scrubSecrets are the values the run's events are scrubbed of: the
// secrets, the run's tools token (AgentTools), and the placeholders of the brokered ones (as NAME_PLACEHOLDER),
// which are worth the key to whoever reaches the gateway while the run
// lives. The placeholders are a function of the run and the gateway key,
// so a takeover with the same key scrubs alike.
func (d *driver) scrubSecrets() sandbox.Secrets {
	secrets := d.secrets()
	names := secrets.Brokered()
	if (len(names) == 0 || d.r.opts.Broker == nil) && d.r.opts.Tools == nil {
		return secrets
	}
	m := map[string]string{}
	for _, n := range secrets.Names() {
		m[n], _ = secrets.Value(n)
	}
	for _, n := range names {
		if d.r.opts.Broker != nil {
			m[n+"_PLACEHOLDER"] = d.r.opts.Broker.Placeholder(d.run, n)
		}
	}
	out, err := sandbox.NewSecrets(d.withToolsToken(m))
	if err != nil {
		return secrets
	}
	return out
}

// interception gives the agent the gateway's forward proxy for HTTPS and
// the sandbox's gateway CA when a brokered secret asks for interception:
// the CA is written next to the run's files, alone and appended to the
// sandbox's system bundle, and named by the variables TLS clients read.
// HTTP_PROXY stays unset, so the plain-HTTP base URLs go straight to the
// gateway.
func (d *driver) interception(env map[string]string, secrets sandbox.Secrets, names []string) error {
	want := false
	for _, n := range names {
		b, _ := secrets.Broker(n)
		want = want || b.Intercept
	}
	if !want {
		return nil
	}
	b := d.r.opts.Broker
	u, err := b.EgressProxy(d.def.Provider.Name(), d.run)
	if err != nil {
		return err
	}
	pem, err := b.CACert(d.run)
	if err != nil {
		return err
	}
	paths, err := journal.PathsFor(d.r.opts.JournalDir, d.run.ID)
	if err != nil {
		return err
	}
	script := `mkdir -p "$1" && cat > "$1/corral-ca.pem" && { cat /etc/ssl/certs/ca-certificates.crt 2>/dev/null; cat "$1/corral-ca.pem"; } > "$1/corral-ca-bundle.pem"`
	res, err := d.handle.Exec(d.ctx, sandbox.Command{Args: []string{"sh", "-c", script, "sh", paths.Files}, Stdin: bytes.NewReader(pem)})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return sandbox.Errorf(sandbox.Internal, "run.start", d.run.ID, "writing the gateway CA into the sandbox: exit %d", res.ExitCode)
	}
	if _, set := env["HTTPS_PROXY"]; !set {
		env["HTTPS_PROXY"], env["https_proxy"] = u, u
	}
	bundle := paths.Files + "/corral-ca-bundle.pem"
	for _, k := range []string{"SSL_CERT_FILE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "REQUESTS_CA_BUNDLE"} {
		env[k] = bundle
	}
	env["NODE_EXTRA_CA_CERTS"] = paths.Files + "/corral-ca.pem"
	return nil
}

// brokerFallbacks returns the start notice's rules for the brokered
// secrets of def that fall back to the environment in run id: those whose
// broker says fallback env and whose provider's sandboxes cannot reach the
// egress gateway (or that have no gateway at all). Computed once at start
// and kept in the run record, so every driver of the run gives the agent
// the same secrets (fallbackNames).
func (r *Runner) brokerFallbacks(def *sandbox.Definition, id string) []event.UnenforcedRule {
	s := def.Workspace.SecretsOrEmpty()
	provider := ""
	if def.Provider != nil {
		provider = def.Provider.Name()
	}
	var rules []event.UnenforcedRule
	for _, n := range s.Brokered() {
		b, _ := s.Broker(n)
		if b.Fallback != sandbox.BrokerFallbackEnv {
			continue
		}
		if r.opts.Broker != nil {
			if _, err := r.opts.Broker.BaseURL(provider, id, b.Hosts[0]); err == nil {
				continue
			}
		}
		rules = append(rules, event.UnenforcedRule{Rule: fallbackRule(n), Decision: sandbox.BrokerFallbackEnv,
			Reason: "the " + provider + " provider's sandboxes cannot reach corral's egress gateway: the value is in the sandbox's environment (broker.fallback: env)"})
	}
	return rules
}

func fallbackRule(name string) string { return "secrets." + name + ".broker" }

// fallbackNames are the brokered secrets the run's start notice says fall
// back to the environment.
func fallbackNames(rec store.Run) []string {
	n, ok := PolicyNotice(rec)
	if !ok {
		return nil
	}
	var names []string
	for _, r := range n.Rules {
		if name, ok := strings.CutPrefix(r.Rule, "secrets."); ok && r.Decision == sandbox.BrokerFallbackEnv {
			names = append(names, strings.TrimSuffix(name, ".broker"))
		}
	}
	return names
}

// RunOfSandbox names the run this process drives in the sandbox of the
// key, if any (for the gateway's attribution of a proxy request without
// credentials: gateway.Options.Identify).
func (r *Runner) RunOfSandbox(key string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, d := range r.drivers {
		if d.run.SandboxKey == key {
			return id, true
		}
	}
	return "", false
}
