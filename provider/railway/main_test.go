package railway_test

import (
	"testing"

	"github.com/d10ffeed/corral/provider/railway/railwayfake"
)

// testToken is the fake's credential.
const testToken = "rw-test-token-4f9c"

// newFake starts a Railway fake closed by the test's cleanup.
func newFake(t *testing.T) *railwayfake.Fake {
	t.Helper()
	f, err := railwayfake.New(railwayfake.Options{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}
