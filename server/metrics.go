package server

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// Metrics are the daemon's Prometheus metrics.
type Metrics struct {
	reg         *prometheus.Registry
	runsStarted prometheus.Counter
	takeovers   prometheus.Counter
	ensure      *prometheus.HistogramVec
	exec        *prometheus.HistogramVec
	reaped      *prometheus.CounterVec
	refused     *prometheus.CounterVec
	forgotten   *prometheus.CounterVec
	ckPruned    prometheus.Counter
	blobsSwept  prometheus.Counter
}

// NewMetrics returns a fresh set of metrics in their own registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		runsStarted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "corral_runs_started_total", Help: "Runs started through this daemon."}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "corral_takeovers_total", Help: "Runs this daemon took over from a driver that was gone."}),
		ensure: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "corral_ensure_seconds", Help: "Time to ensure a run's sandbox, by outcome.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}}, []string{"outcome"}),
		exec: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "corral_exec_seconds", Help: "Time of commands run in sandboxes, by provider.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30}}, []string{"provider"}),
		reaped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_reaper_runs_total", Help: "Runs the reaper looked at, by outcome."}, []string{"outcome"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_requests_refused_total", Help: "Requests refused before any route, by reason (host, origin, content-type, token, run-token: a run's tools token used where it does not open)."}, []string{"reason"}),
		forgotten: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_retention_runs_total", Help: "Ended runs the retention pass handled, by result (forgotten: the retention mode applied; pruned: events past the max age deleted; failed)."}, []string{"result"}),
		ckPruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "corral_checkpoint_pruned_total", Help: "Checkpoints the retention pass deleted by the keep and max-age rules."}),
		blobsSwept: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "corral_blobs_swept_total", Help: "Blobs the retention pass deleted because no checkpoint referenced them."}),
	}
	m.reg.MustRegister(m.runsStarted, m.takeovers, m.ensure, m.exec, m.reaped, m.refused, m.forgotten, m.ckPruned, m.blobsSwept,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveEnsure records an ensure (for run.Options.OnEnsure).
func (m *Metrics) ObserveEnsure(d time.Duration, outcome string) {
	m.ensure.WithLabelValues(outcome).Observe(d.Seconds())
}

// ObserveTakeOver counts a run taken over (for run.Options.OnTakeOver).
func (m *Metrics) ObserveTakeOver(string) { m.takeovers.Inc() }

func (m *Metrics) observeForget(rep run.ForgetReport) {
	m.forgotten.WithLabelValues("forgotten").Add(float64(rep.Forgotten))
	m.forgotten.WithLabelValues("pruned").Add(float64(rep.Pruned))
	m.forgotten.WithLabelValues("failed").Add(float64(rep.Failed))
	m.ckPruned.Add(float64(rep.CheckpointsPruned))
	m.blobsSwept.Add(float64(rep.BlobsSwept))
}

func (m *Metrics) observeReap(rep run.ReapReport) {
	for _, r := range rep.Runs {
		m.reaped.WithLabelValues(r.Outcome).Inc()
	}
}

// Handler serves the metrics, with the store's runs by status and
// sandboxes by provider counted at each scrape.
func (m *Metrics) Handler(st store.Store) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&storeCollector{st: st})
	return promhttp.HandlerFor(prometheus.Gatherers{m.reg, reg}, promhttp.HandlerOpts{})
}

var (
	runsDesc      = prometheus.NewDesc("corral_runs", "Runs in the store, by status.", []string{"status"}, nil)
	sandboxesDesc = prometheus.NewDesc("corral_sandboxes", "Sandbox instances in the store, by provider.", []string{"provider"}, nil)
)

// storeCollector counts runs and sandboxes in the store when scraped.
type storeCollector struct{ st store.Store }

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- runsDesc
	ch <- sandboxesDesc
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, st := range store.RunStatuses() {
		runs, err := c.st.ListRuns(ctx, store.RunFilter{Statuses: []store.RunStatus{st}})
		if err != nil {
			return
		}
		ch <- prometheus.MustNewConstMetric(runsDesc, prometheus.GaugeValue, float64(len(runs)), string(st))
	}
	insts, err := c.st.ListInstances(ctx, store.InstanceFilter{})
	if err != nil {
		return
	}
	by := map[string]int{}
	for _, in := range insts {
		by[in.Provider]++
	}
	for p, n := range by {
		ch <- prometheus.MustNewConstMetric(sandboxesDesc, prometheus.GaugeValue, float64(n), p)
	}
}

// Decorator returns the handle decorator (sandbox.GuardOptions.Decorate)
// that observes the time of every Exec in the sandboxes of the named
// provider in corral_exec_seconds. The guard applies it to every handle it
// hands out, forks included, so the decorator wraps nothing else:
//
//	p = sandbox.Guard(p, sandbox.GuardOptions{Decorate: m.Decorator(p.Name())})
func (m *Metrics) Decorator(provider string) func(sandbox.Handle) sandbox.Handle {
	exec := m.exec.WithLabelValues(provider)
	return func(h sandbox.Handle) sandbox.Handle {
		return &timedHandle{Handle: h, exec: exec}
	}
}

// Instrument returns p guarded with the metrics' decorator (Decorator);
// guarding an already guarded provider composes the decorators instead of
// wrapping twice.
func (m *Metrics) Instrument(p sandbox.Provider) sandbox.Provider {
	return sandbox.Guard(p, sandbox.GuardOptions{Decorate: m.Decorator(p.Name())})
}

// timedHandle observes the time of each Exec. Fork is the embedded
// handle's: the guard decorates forks itself.
type timedHandle struct {
	sandbox.Handle
	exec prometheus.Observer
}

// Unwrap returns the decorated handle, for sandbox.As.
func (h *timedHandle) Unwrap() sandbox.Handle { return h.Handle }

func (h *timedHandle) Exec(ctx context.Context, cmd sandbox.Command) (*sandbox.ExecResult, error) {
	began := time.Now()
	res, err := h.Handle.Exec(ctx, cmd)
	h.exec.Observe(time.Since(began).Seconds())
	return res, err
}
