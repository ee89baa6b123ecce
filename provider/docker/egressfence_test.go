package docker

import "testing"

func TestBridgeName(t *testing.T) {
	for _, c := range []struct {
		id   string
		opts map[string]string
		want string
	}{
		{"d17c331e196d5f0c9e1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7", nil, "br-d17c331e196d"},
		{"d17c331e196d5f0c", map[string]string{"com.docker.network.bridge.name": "corral-egress0"}, "corral-egress0"},
		{"short", map[string]string{}, "br-short"},
	} {
		if got := bridgeName(c.id, c.opts); got != c.want {
			t.Errorf("bridgeName(%q, %v) = %q, want %q", c.id, c.opts, got, c.want)
		}
	}
}
