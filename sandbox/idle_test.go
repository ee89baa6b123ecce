package sandbox_test

import (
	"testing"
	"time"

	"github.com/d10ffeed/corral/sandbox"
)

// TestLifecycleIdle: how keepAlive and idle.destroy combine, and the
// contradictions refused.
func TestLifecycleIdle(t *testing.T) {
	const m, h = time.Minute, time.Hour
	for _, c := range []struct {
		name           string
		lc             sandbox.Lifecycle
		ok             bool
		pause, destroy time.Duration
	}{
		{"nothing", sandbox.Lifecycle{}, true, 0, 0},
		{"keepAlive alone is the destroy time", sandbox.Lifecycle{KeepAlive: 30 * m}, true, 0, 30 * m},
		{"idle.destroy alone", sandbox.Lifecycle{Idle: sandbox.Idle{Destroy: h}}, true, 0, h},
		{"both, the same", sandbox.Lifecycle{KeepAlive: h, Idle: sandbox.Idle{Destroy: h}}, true, 0, h},
		{"both, different", sandbox.Lifecycle{KeepAlive: 30 * m, Idle: sandbox.Idle{Destroy: h}}, false, 0, 0},
		{"pause before destroy", sandbox.Lifecycle{Idle: sandbox.Idle{Pause: 10 * m, Destroy: 24 * h}}, true, 10 * m, 24 * h},
		{"pause before keepAlive", sandbox.Lifecycle{KeepAlive: h, Idle: sandbox.Idle{Pause: 10 * m}}, true, 10 * m, h},
		{"pause alone: never destroyed", sandbox.Lifecycle{Idle: sandbox.Idle{Pause: 10 * m}}, true, 10 * m, 0},
		{"pause at destroy", sandbox.Lifecycle{Idle: sandbox.Idle{Pause: h, Destroy: h}}, false, 0, 0},
		{"pause after keepAlive", sandbox.Lifecycle{KeepAlive: 30 * m, Idle: sandbox.Idle{Pause: h}}, false, 0, 0},
		{"negative pause", sandbox.Lifecycle{Idle: sandbox.Idle{Pause: -m}}, false, 0, 0},
		{"negative approval wait", sandbox.Lifecycle{Idle: sandbox.Idle{ApprovalWait: -m}}, false, 0, 0},
		{"checkpoint keep and max age", sandbox.Lifecycle{CheckpointKeep: 5, CheckpointMaxAge: 24 * h}, true, 0, 0},
		{"negative checkpoint keep", sandbox.Lifecycle{CheckpointKeep: -1}, false, 0, 0},
		{"negative checkpoint max age", sandbox.Lifecycle{CheckpointMaxAge: -h}, false, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.lc.Validate()
			if c.ok != (err == nil) || (err != nil && sandbox.CodeOf(err) != sandbox.InvalidArgument) {
				t.Fatalf("Validate = %v, want ok %v", err, c.ok)
			}
			if !c.ok {
				return
			}
			if p, d := c.lc.IdleTimes(); p != c.pause || d != c.destroy {
				t.Errorf("IdleTimes = %s, %s; want %s, %s", p, d, c.pause, c.destroy)
			}
		})
	}
}
