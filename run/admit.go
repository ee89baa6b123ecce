package run

// Admission of agent starts on this machine (Options.MaxLocalStarts).

import "sync"

// localProvider is the name of the provider whose sandboxes are processes
// on this machine (provider/local.Name; run imports no provider).
const localProvider = "local"

// startGauge counts the local starts under way and remembers the most at
// once, for tests.
type startGauge struct {
	mu       sync.Mutex
	now, max int
}

func (g *startGauge) add(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now += n
	g.max = max(g.max, g.now)
}

// admitStart waits for a start token when the run's sandbox is on the
// local provider and the starts are bounded; release returns it.
func (d *driver) admitStart() (release func(), err error) {
	sem := d.r.localStarts
	if sem == nil || d.def.Provider == nil || d.def.Provider.Name() != localProvider {
		return func() {}, nil
	}
	select {
	case sem <- struct{}{}:
	case <-d.ctx.Done():
		return nil, d.ctx.Err()
	}
	d.r.starting.add(1)
	return func() {
		d.r.starting.add(-1)
		<-sem
	}, nil
}
