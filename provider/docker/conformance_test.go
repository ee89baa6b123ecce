package docker_test

import (
	"testing"

	"github.com/d10ffeed/corral/provider/docker"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
)

// suitePort is the container port the conformance suite listens on; the
// provider publishes it on 127.0.0.1.
const suitePort = 8080

func TestConformance(t *testing.T) {
	p := newProvider(t, docker.Options{Ports: []int{suitePort}})
	sandboxtest.Run(t, sandboxtest.Harness{Provider: p, Port: suitePort})
}
