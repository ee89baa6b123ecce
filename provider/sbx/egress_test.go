package sbx_test

import (
	"strings"
	"testing"

	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/sbx"
	"github.com/d10ffeed/corral/provider/sbx/sbxfake"
	"github.com/d10ffeed/corral/sandbox"
)

// TestEgressTranslated: with EgressDefaultDenied an egress allow-list
// becomes the sandbox's sbx allow rule (one comma-separated RESOURCES,
// sbx's own forms: host, *.domain, host:port), added before the sandbox
// first starts; without it the list is refused, since per-sandbox allows
// only add to the machine's default policy.
func TestEgressTranslated(t *testing.T) {
	f := newFake(t)
	ctx := testutil.HangGuard(t)
	p := newProvider(t, f, sbx.Options{EgressDefaultDenied: true})
	rec := createRecorded(t, f, p, sandbox.CreateOptions{ID: "egress", Egress: []string{"api.anthropic.com", "*.npmjs.org", "10.1.2.3:22"}})
	if len(rec.Policies) != 1 || rec.Policies[0].Decision != "allow" || strings.Join(rec.Policies[0].Resources, ",") != "api.anthropic.com,*.npmjs.org,10.1.2.3:22" || rec.Status != "stopped" {
		t.Fatalf("rules %+v (status %s)", rec.Policies, rec.Status)
	}
	var ne sandbox.NativeEgress
	if !sandbox.ProviderAs(newProvider(t, f, sbx.Options{}), &ne) {
		t.Fatal("sbx is not a sandbox.NativeEgress")
	}
	if err := ne.NativeEgress([]string{"api.anthropic.com"}); sandbox.CodeOf(err) != sandbox.FailedPrecondition || !strings.Contains(err.Error(), "egressDefaultDenied") {
		t.Errorf("a list without EgressDefaultDenied: %v", err)
	}
	if _, err := newProvider(t, f, sbx.Options{}).Create(ctx, sandbox.CreateOptions{ID: "egress-refused", Egress: []string{"api.anthropic.com"}}); sandbox.CodeOf(err) != sandbox.FailedPrecondition {
		t.Errorf("create with a list without EgressDefaultDenied: %v", err)
	}
}

// createRecorded creates a sandbox (destroyed when the test ends) and
// returns the fake's record of it.
func createRecorded(t *testing.T, f *fake, p *sbx.Provider, opts sandbox.CreateOptions) sbxfake.Record {
	t.Helper()
	h, err := p.Create(testutil.HangGuard(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Destroy(testutil.HangGuard(t), h.ID()) })
	rec, ok := sbxfake.Lookup(f.state, h.ID())
	if !ok {
		t.Fatal("no fake record")
	}
	return rec
}
