package gateway

import (
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"
)

// TestCASharedByReplicas checks that two gateways with the same key (two
// replicas reading one gateway.key) mint leaves that verify against the
// CA certificate either gave a sandbox, and that another sandbox's CA, or
// another key's, does not verify them.
func TestCASharedByReplicas(t *testing.T) {
	key := NewKey()
	a, b, other := &authorities{seed: key}, &authorities{seed: key}, &authorities{seed: NewKey()}
	root := func(as *authorities, sandboxKey string) *x509.CertPool {
		t.Helper()
		ca, err := as.get(sandboxKey)
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(ca.pem)
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		p := x509.NewCertPool()
		p.AddCert(c)
		return p
	}
	caB, err := b.get("sb-1")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := caB.leaf("api.example.test")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(leaf.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		roots *x509.CertPool
		ok    bool
	}{
		{"the other replica's CA of the sandbox", root(a, "sb-1"), true},
		{"the same replica's", root(b, "sb-1"), true},
		{"another sandbox's CA", root(a, "sb-2"), false},
		{"the CA of another gateway key", root(other, "sb-1"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := cert.Verify(x509.VerifyOptions{Roots: tt.roots, DNSName: "api.example.test", CurrentTime: time.Now()})
			if (err == nil) != tt.ok {
				t.Fatalf("verify: %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
