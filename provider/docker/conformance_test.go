package docker_test

import (
	"testing"

	"github.com/d10ffeed/corral/journal/journaltest"
	"github.com/d10ffeed/corral/provider/docker"
	"github.com/d10ffeed/corral/run/runtest"
	"github.com/d10ffeed/corral/sandbox/sandboxtest"
)

// suitePort is the container port the conformance suite listens on; the
// provider publishes it on 127.0.0.1.
const suitePort = 8080

func TestConformance(t *testing.T) {
	p := newProvider(t, docker.Options{Ports: []int{suitePort}})
	sandboxtest.Run(t, sandboxtest.Harness{Provider: p, Port: suitePort})
}

// TestJournalConformance runs the run journal's suite in containers.
func TestJournalConformance(t *testing.T) {
	journaltest.Run(t, journaltest.Harness{Provider: newProvider(t, docker.Options{})})
}

// TestRunConformance runs the takeover and reaper suites in containers,
// over the memory and SQLite stores (PostgreSQL runs them on the local
// provider).
func TestRunConformance(t *testing.T) {
	p := newProvider(t, docker.Options{})
	runtest.RunEach(t, p, runtest.EmbeddedStores())
}
