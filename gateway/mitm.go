package gateway

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// Interception: a brokered secret whose broker sets Intercept reaches its
// hosts through the forward proxy too, over HTTPS, for agents that cannot
// be given a base URL. The run's agent gets HTTPS_PROXY and a per-sandbox
// certificate authority in its trust settings (SSL_CERT_FILE and the
// like); a CONNECT to such a host is answered with a certificate that CA
// signs, the requests inside are read, their placeholders swapped as on
// the reverse proxy, and sent on to the host over real TLS. Every other
// CONNECT is a plain tunnel. A sandbox's CA key is derived from the
// gateway key (HMAC-SHA256 under it of the sandbox key, a P-256 scalar),
// so every replica reading the same gateway.key mints leaves under the
// same CA key: a sandbox that trusts the CA certificate one replica gave
// it verifies the leaves of any other (TestCASharedByReplicas). The key is
// never written anywhere; each process keeps what it derived in memory.

// authority is one sandbox's CA and the leaf certificates it signed.
type authority struct {
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	pem    []byte
	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

type authorities struct {
	seed []byte // the gateway key
	mu   sync.Mutex
	cas  map[string]*authority
}

// CACert returns the PEM certificate of the CA of the run's sandbox.
func (g *Gateway) CACert(run store.Run) ([]byte, error) {
	ca, err := g.cas.get(run.SandboxKey)
	if err != nil {
		return nil, err
	}
	return ca.pem, nil
}

func (a *authorities) get(key string) (*authority, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ca, ok := a.cas[key]; ok {
		return ca, nil
	}
	k, err := caKey(a.seed, key)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, "gateway.ca", key, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "corral gateway CA " + short(key)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return nil, sandbox.Wrap(sandbox.Internal, "gateway.ca", key, err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &authority{cert: cert, key: k, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), leaves: map[string]*tls.Certificate{}}
	if a.cas == nil {
		a.cas = map[string]*authority{}
	}
	a.cas[key] = ca
	return ca, nil
}

// caKey derives the CA key of a sandbox from the gateway key: the first
// HMAC-SHA256(seed, "corral-ca/<counter>/<sandbox key>") that is a valid
// P-256 scalar (one fails with odds of about 2^-32).
func caKey(seed []byte, sandboxKey string) (*ecdsa.PrivateKey, error) {
	for i := range 8 {
		m := hmac.New(sha256.New, seed)
		m.Write([]byte("corral-ca/" + strconv.Itoa(i) + "/" + sandboxKey))
		if k, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), m.Sum(nil)); err == nil {
			return k, nil
		}
	}
	return nil, errors.New("no valid CA key derived")
}

// leaf returns a certificate for host (no port) signed by the CA.
func (ca *authority) leaf(host string) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c, ok := ca.leaves[host]; ok {
		return c, nil
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: host},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &k.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der, ca.cert.Raw}, PrivateKey: k}
	ca.leaves[host] = c
	return c, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// intercepts reports whether a CONNECT to host (host:port) is to be
// intercepted for the run: a brokered secret with Intercept names it.
func intercepts(secrets sandbox.Secrets, host string) bool {
	h := strings.TrimSuffix(host, ":443")
	for _, n := range secrets.Brokered() {
		if b, _ := secrets.Broker(n); b.Intercept && b.AllowsHost("https", h) {
			return true
		}
	}
	return false
}

// intercept serves the requests of one CONNECT to host as the host, with
// the sandbox's CA, swapping placeholders and forwarding each over TLS.
func (g *Gateway) intercept(w *countingWriter, r *http.Request, host string, run store.Run, secrets sandbox.Secrets, rec *Record) {
	ca, err := g.cas.get(run.SandboxKey)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	name, _, err := net.SplitHostPort(host)
	if err != nil {
		name = host
	}
	cert, err := ca.leaf(name)
	if err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	conn, _, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	rec.Status = http.StatusOK
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	tc := tls.Server(conn, &tls.Config{Certificates: []tls.Certificate{*cert}, MinVersion: tls.VersionTLS12})
	defer tc.Close()
	br := bufio.NewReader(tc)
	upHost := strings.TrimSuffix(host, ":443")
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		req = req.WithContext(r.Context())
		req.URL.Scheme, req.URL.Host, req.Host, req.RequestURI = "https", upHost, upHost, ""
		resp := &http.Response{ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Request: req}
		if why := g.substitute(req.Header, run, secrets, "https", upHost); why != "" {
			rec.Refused = why
			resp.StatusCode, resp.Body = http.StatusForbidden, http.NoBody
		} else if resp, err = g.o.Transport.RoundTrip(req); err != nil {
			rec.Failed = err.Error()
			resp = &http.Response{StatusCode: http.StatusBadGateway, ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{}, Body: http.NoBody, Request: req}
		}
		err = resp.Write(&countingConn{w: tc, n: &rec.Bytes})
		resp.Body.Close()
		if err != nil || req.Close || resp.Close {
			return
		}
	}
}

type countingConn struct {
	w interface{ Write([]byte) (int, error) }
	n *int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	*c.n += int64(n)
	return n, err
}
