package daytona_test

import (
	"net/http"
	"testing"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/provider/daytona"
	"github.com/d10ffeed/corral/sandbox"
)

// TestDeleteSnapshot: Daytona's DELETE /snapshots/{id} takes the id, not
// the name Snapshot returns, so DeleteSnapshot resolves the name first
// (GET /snapshots/{name}, as the SDK does) and the snapshot is really gone
// afterwards, not a 404 taken for success; a gone snapshot is fine and a
// refused lookup is an error, never a silent leak.
func TestDeleteSnapshot(t *testing.T) {
	cases := []struct {
		name     string
		twice    bool
		fault    *fakecloud.Fault
		wantCode sandbox.Code
		wantLeft int
	}{
		{name: "deleted"},
		{name: "gone-is-fine", twice: true},
		{name: "lookup-refused", fault: &fakecloud.Fault{Status: http.StatusForbidden}, wantCode: sandbox.PermissionDenied, wantLeft: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newFake(t)
			ctx := testutil.HangGuard(t)
			p, _ := newProvider(t, s, daytona.Options{})
			h, err := p.Create(ctx, sandbox.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = h.Destroy(ctx) })
			snap, err := h.Snapshot(ctx, "del")
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Snapshots(); len(got) != 1 || got[0] != snap.ID {
				t.Fatalf("the fake holds %v, want [%s]", got, snap.ID)
			}
			if tc.fault != nil {
				s.Inject("getSnapshot", *tc.fault)
			}
			err = p.DeleteSnapshot(ctx, snap.ID)
			if tc.twice && err == nil {
				err = p.DeleteSnapshot(ctx, snap.ID)
			}
			if sandbox.CodeOf(err) != tc.wantCode {
				t.Fatalf("DeleteSnapshot: %v (code %q), want code %q", err, sandbox.CodeOf(err), tc.wantCode)
			}
			if got := s.Snapshots(); len(got) != tc.wantLeft {
				t.Fatalf("after DeleteSnapshot the fake holds %v, want %d left", got, tc.wantLeft)
			}
			t.Logf("%s: get %d, delete %d requests; err %v", tc.name, s.Count("getSnapshot"), s.Count("deleteSnapshot"), err)
		})
	}
}
