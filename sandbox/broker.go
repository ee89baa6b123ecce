package sandbox

import (
	"slices"
	"strconv"
	"strings"
)

// Broker says where a brokered secret may be used. A brokered secret never
// enters the sandbox: each run gets a placeholder instead (worthless
// outside that run), and corral's egress gateway swaps the placeholder for
// the real value on requests to the named hosts only, in the named header.
type Broker struct {
	// Hosts are the upstream hosts the value may be sent to: "host" or
	// "host:port" (HTTPS), or "http://host:port" for a plain-HTTP upstream
	// (a local service, a test's fake). At least one.
	Hosts []string `json:"hosts"`
	// Header is where the value goes: "bearer" (Authorization: Bearer),
	// "basic" (Authorization: Basic, the placeholder inside the decoded
	// credentials) or a header name such as x-api-key.
	Header string `json:"header"`
	// BaseURLEnv is the environment variable that points the agent at the
	// gateway (the first host's route). Empty means the default for the
	// secret's name (ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN:
	// ANTHROPIC_BASE_URL; OPENAI_API_KEY: OPENAI_BASE_URL).
	BaseURLEnv string `json:"baseURLEnv,omitempty"`
	// Intercept also lets the value reach its hosts over HTTPS through
	// the gateway's forward proxy: the agent gets HTTPS_PROXY and the
	// sandbox's gateway CA in its trust settings, for clients that cannot
	// be given a base URL.
	Intercept bool `json:"intercept,omitempty"`
	// Fallback is what a run does when its sandbox's provider cannot
	// reach corral's egress gateway: "" refuses the run (the default);
	// BrokerFallbackEnv gives the agent the real value in its environment,
	// as without a broker, and says so at run start (a policy.unenforced
	// rule "secrets.<name>.broker").
	Fallback string `json:"fallback,omitempty"`
}

// BrokerFallbackEnv is the Fallback that puts the value in the sandbox's
// environment where the gateway is out of reach.
const BrokerFallbackEnv = "env"

// Broker header modes besides a plain header name.
const (
	BrokerBearer = "bearer"
	BrokerBasic  = "basic"
)

// defaultBaseURLEnv maps well-known secret names to the base URL variable
// their CLIs read.
var defaultBaseURLEnv = map[string]string{
	"ANTHROPIC_API_KEY":    "ANTHROPIC_BASE_URL",
	"ANTHROPIC_AUTH_TOKEN": "ANTHROPIC_BASE_URL",
	"OPENAI_API_KEY":       "OPENAI_BASE_URL",
}

// BaseURLVar returns the variable that carries the gateway's URL for the
// secret name: BaseURLEnv, or the name's default, or "".
func (b Broker) BaseURLVar(name string) string {
	if b.BaseURLEnv != "" {
		return b.BaseURLEnv
	}
	return defaultBaseURLEnv[name]
}

// HeaderName is the HTTP header the value travels in.
func (b Broker) HeaderName() string {
	switch strings.ToLower(b.Header) {
	case BrokerBearer, BrokerBasic:
		return "Authorization"
	}
	return b.Header
}

// Validate checks the broker of the named secret.
func (b Broker) Validate(name string) error {
	field := "secrets." + name + ".broker"
	if len(b.Hosts) == 0 {
		return Errorf(InvalidArgument, "workspace", field+".hosts", "name at least one host the value may be sent to")
	}
	for _, h := range b.Hosts {
		if _, _, err := SplitBrokerHost(h); err != nil {
			return Errorf(InvalidArgument, "workspace", field+".hosts", "%v", err)
		}
	}
	switch h := strings.ToLower(b.Header); {
	case h == "":
		return Errorf(InvalidArgument, "workspace", field+".header", "set bearer, basic or a header name such as x-api-key")
	case h == BrokerBearer, h == BrokerBasic:
	case !validHeaderName(b.Header):
		return Errorf(InvalidArgument, "workspace", field+".header", "%q is not bearer, basic or a header name", b.Header)
	}
	if b.Fallback != "" && b.Fallback != BrokerFallbackEnv {
		return Errorf(InvalidArgument, "workspace", field+".fallback", "%q: want env, or nothing to refuse runs the gateway cannot serve", b.Fallback)
	}
	if b.BaseURLEnv != "" {
		if err := ValidateEnvName(b.BaseURLEnv); err != nil {
			return Errorf(InvalidArgument, "workspace", field+".baseURLEnv", "%v", err)
		}
	}
	return nil
}

// SplitBrokerHost reads a broker host: it returns the URL scheme ("https",
// or "http" for an "http://" host) and the host[:port], lower-cased.
func SplitBrokerHost(h string) (scheme, host string, err error) {
	scheme, host = "https", strings.ToLower(strings.TrimSpace(h))
	if rest, ok := strings.CutPrefix(host, "http://"); ok {
		scheme, host = "http", rest
	} else if rest, ok := strings.CutPrefix(host, "https://"); ok {
		host = rest
	}
	if host == "" || strings.ContainsAny(host, "/?#@ \t") {
		return "", "", Errorf(InvalidArgument, "broker", h, "want host, host:port or http://host:port (no path)")
	}
	name := host
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.HasSuffix(host, "]") {
		port, err := strconv.Atoi(host[i+1:])
		if err != nil || port <= 0 || port > 65535 {
			return "", "", Errorf(InvalidArgument, "broker", h, "bad port")
		}
		name = strings.TrimSuffix(strings.TrimPrefix(host[:i], "["), "]")
	}
	if name == "" || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") {
		return "", "", Errorf(InvalidArgument, "broker", h, "bad host name")
	}
	return scheme, host, nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}

// WithBrokers returns a copy of s in which the named secrets are brokered.
// Every name must be one of s's secrets and every broker valid.
func (s Secrets) WithBrokers(brokers map[string]Broker) (Secrets, error) {
	out := Secrets{m: s.m, brokers: map[string]Broker{}}
	for k, v := range s.brokers {
		out.brokers[k] = v
	}
	for name, b := range brokers {
		if _, ok := s.m[name]; !ok {
			return Secrets{}, Errorf(InvalidArgument, "workspace", "secrets."+name, "a broker for an unknown secret")
		}
		if err := b.Validate(name); err != nil {
			return Secrets{}, err
		}
		b.Hosts = append([]string(nil), b.Hosts...)
		out.brokers[name] = b
	}
	return out, nil
}

// WithoutBrokers returns a copy of s in which the named secrets are not
// brokered (their values go to the sandbox as they are).
func (s Secrets) WithoutBrokers(names []string) Secrets {
	out := Secrets{m: s.m, brokers: map[string]Broker{}}
	for k, v := range s.brokers {
		if !slices.Contains(names, k) {
			out.brokers[k] = v
		}
	}
	return out
}

// Broker returns the named secret's broker, if it is brokered.
func (s Secrets) Broker(name string) (Broker, bool) {
	b, ok := s.brokers[name]
	return b, ok
}

// Brokered returns the names of the brokered secrets, sorted.
func (s Secrets) Brokered() []string {
	var names []string
	for _, n := range s.Names() {
		if _, ok := s.brokers[n]; ok {
			names = append(names, n)
		}
	}
	return names
}

// WithPlaceholders returns the secrets a run's agent is given: every
// brokered secret's value replaced by placeholder(name), the others as
// they are. The result has no brokers (its values are what the sandbox may
// hold).
func (s Secrets) WithPlaceholders(placeholder func(name string) string) Secrets {
	m := make(map[string]string, len(s.m))
	for k, v := range s.m {
		if _, ok := s.brokers[k]; ok {
			v = placeholder(k)
		}
		m[k] = v
	}
	return Secrets{m: m}
}

// AllowsHost reports whether the value may be sent to host (host[:port],
// lower case) over scheme.
func (b Broker) AllowsHost(scheme, host string) bool {
	for _, h := range b.Hosts {
		if s, hh, err := SplitBrokerHost(h); err == nil && s == scheme && hh == host {
			return true
		}
	}
	return false
}
