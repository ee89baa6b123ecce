// Package run drives agent runs that outlive the process that started
// them.
//
// The agent writes to a journal inside its sandbox (package journal). A
// driver — one process at a time, holding a lease on the run and the
// run's current driver epoch — reads the journal, translates its lines
// into events (package harness) and appends them to the run's event log in
// the store, fenced by the epoch. When the driver's process goes away the
// run goes on; any process can attach: if no live driver holds the run it
// takes it over (lease, epoch bump), replays the journal from byte 0,
// checks the replay against the stored log and appends only what is
// missing. Clients read the log from any offset and then live, with no gap
// and no repeat. Cancel is a request on the record that whichever process
// drives the run acts on; a reaper finalizes and expires runs nobody
// drives.
package run

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/journal"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/sandbox/bootstrap"
	"github.com/d10ffeed/corral/sandbox/ensure"
	"github.com/d10ffeed/corral/store"
)

// Runner starts, drives, attaches to and cancels runs.
type Runner struct {
	store       store.Store
	defs        map[string]*sandbox.Definition
	harnesses   map[string]harness.Harness
	ensure      *ensure.Manager
	log         *slog.Logger
	opts        Options
	mu          sync.Mutex
	drivers     map[string]*driver // runs this process drives
	driverGroup sync.WaitGroup
	sweepCursor int           // where the next journal sweep starts among the instances
	pruneCursor int           // where the next checkpoint prune starts among the threads
	lastSweep   time.Time     // when this process last swept blobs
	launched    uint64        // drivers launched, for Activity
	localStarts chan struct{} // Options.MaxLocalStarts tokens; nil = unbounded
	starting    startGauge    // local starts under way, and their most
}

// Options tune a Runner. Every field has a default.
type Options struct {
	// Logger receives what goes wrong in the background. Default: discard.
	Logger *slog.Logger
	// JournalDir is the journal directory inside sandboxes. Default
	// journal.DefaultDir.
	JournalDir string
	// LeaseTTL is the driver lease: a driver that dies is replaced after at
	// most this long. Default 10s, or CORRAL_LEASE_TTL when set.
	LeaseTTL time.Duration
	// FlushInterval bounds how long a translated event waits before it is
	// appended. Default 20ms.
	FlushInterval time.Duration
	// BatchSize is the most events one append carries. Default 512.
	BatchSize int
	// PollInterval is the journal poll interval (on providers without
	// follow) and the event-log poll interval of a client following a run
	// driven by another process. Default 250ms and 100ms.
	PollInterval, LogPollInterval time.Duration
	// CancelCheck is how often a driver looks in the store for a cancel
	// request made through another process (one made through this
	// process's Runner reaches its driver at once). Default 1s.
	CancelCheck time.Duration
	// FirstByteTimeout bounds the wait for a fresh journal's first byte.
	// Default 10s.
	FirstByteTimeout time.Duration
	// Strategy forces the journal read strategy (for diagnostics and
	// benchmarks); by default it follows the provider's capabilities.
	Strategy journal.Strategy
	// KillGrace is the time a cancelled agent gets between SIGTERM and
	// SIGKILL. Default 2s.
	KillGrace time.Duration
	// MaxEventBytes caps what one run puts in its event log: the
	// JSON-escaped bytes of its text, reasoning and tool-argument deltas
	// plus the encoded size of its other events. Past it the log records
	// one output.truncated event, then drops those deltas (and empties
	// tool results) while still recording every other event — tool call
	// starts and ends, file.changed, the closing RUN_FINISHED or
	// RUN_ERROR. The journal in the sandbox keeps everything. The count
	// is a function of the journal alone, so a replay reaches the cap at
	// the same byte; the log itself is larger by the events' envelopes
	// (tens of bytes each). A run taken over by another process keeps the
	// truncation its log already records; before that, the cap of the
	// process driving the run applies. 0 means DefaultMaxEventBytes
	// (64 MiB); negative means no cap.
	MaxEventBytes int64
	// OnStep is told of setup steps while a run's sandbox is created.
	OnStep func(runID string, ev bootstrap.StepEvent)
	// OnTakeOver is told of each run this process takes over.
	OnTakeOver func(runID string)
	// OnEnsure is told how long ensuring a run's sandbox took and which
	// path it took ("created", "resumed", "restored", or "failed").
	OnEnsure func(d time.Duration, outcome string)
	// Retention is the default of what the stores keep of ended runs (see
	// store.Retention); a definition or a request may ask for less, never
	// for more. Default all.
	Retention store.Retention
	// Blobs keeps the files of checkpoints; default the store itself (the
	// SQL stores keep blobs in a table). store/blobstore opens a bucket.
	Blobs store.BlobStore
	// Now returns the time. Default time.Now.
	Now func() time.Time
	// Broker is the egress gateway that brokered secrets need (see
	// Broker); a definition with brokered secrets cannot start without
	// one.
	Broker Broker
	// Tools, when set, are the daemon's tools for each run's own agent
	// (the checkpoint tools): the runner adds them to the agent's MCP
	// servers as AgentToolsServer, with the run's token.
	Tools AgentTools
	// MaxLocalStarts bounds the runs on the local provider (processes on
	// this machine) that start their agent at once: sandbox ensure, the
	// harness's prepare and the spawn of the agent's wrapper. The others
	// wait their turn (or their context) before the ensure, so that a burst
	// of runs does not oversubscribe the CPU and starve the runs already
	// going (at 400 runs started at once on 2 cores, unbounded, store calls
	// waited seconds for a scheduler slot; bounded at 4, under 0.25 s, at
	// the same runs/s). Default 2 × GOMAXPROCS; negative means unbounded.
	// Other providers' starts wait on the network, not this CPU, and are
	// not bounded. A local definition whose setup steps run long holds its
	// turn that long (bounding the spawn alone was measured and does not
	// help: the ensure and prepare are most of the burst): raise the bound,
	// or make it negative, for such definitions.
	MaxLocalStarts int
}

// New returns a Runner over st, able to run the given definitions and
// harnesses (by id and name).
func New(st store.Store, defs []*sandbox.Definition, harnesses []harness.Harness, opts Options) (*Runner, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = 10 * time.Second
		if v, err := time.ParseDuration(os.Getenv("CORRAL_LEASE_TTL")); err == nil && v > 0 {
			opts.LeaseTTL = v
		}
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = 20 * time.Millisecond
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 512
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 250 * time.Millisecond
	}
	if opts.LogPollInterval <= 0 {
		opts.LogPollInterval = 100 * time.Millisecond
	}
	if opts.CancelCheck <= 0 {
		opts.CancelCheck = time.Second
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = 2 * time.Second
	}
	if !opts.Retention.Valid() {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "run.new", "", "retention %q: want all, sandbox or none", opts.Retention)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxEventBytes == 0 {
		opts.MaxEventBytes = DefaultMaxEventBytes
	}
	if opts.MaxLocalStarts == 0 {
		opts.MaxLocalStarts = 2 * runtime.GOMAXPROCS(0)
	}
	r := &Runner{
		store: st, defs: map[string]*sandbox.Definition{}, harnesses: map[string]harness.Harness{},
		log: opts.Logger, opts: opts, drivers: map[string]*driver{},
	}
	if opts.MaxLocalStarts > 0 {
		r.localStarts = make(chan struct{}, opts.MaxLocalStarts)
	}
	for _, d := range defs {
		if err := d.Validate(); err != nil {
			return nil, err
		}
		if _, dup := r.defs[d.ID]; dup {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, "run.new", d.ID, "two definitions with one id")
		}
		r.defs[d.ID] = d
	}
	for _, h := range harnesses {
		r.harnesses[h.Name()] = h
	}
	r.ensure = &ensure.Manager{Instances: st, Locker: st, Logger: opts.Logger}
	r.ensure.Checkpoint = r.restoreHead
	return r, nil
}

// Store returns the runner's store.
func (r *Runner) Store() store.Store { return r.store }

// Ensure returns the runner's ensure manager.
func (r *Runner) Ensure() *ensure.Manager { return r.ensure }

// Definition returns a definition by id.
func (r *Runner) Definition(id string) (*sandbox.Definition, bool) {
	d, ok := r.defs[id]
	return d, ok
}

// StartRequest asks for a new run.
type StartRequest struct {
	// ID is the run's id, chosen by the caller (an AG-UI client's runId);
	// empty mints one. It must be 1 to 128 letters, digits, '.', '_' or
	// '-', not starting with '.' or '-', and unused (AlreadyExists).
	ID         string
	Definition string // definition id; required
	Thread     string // thread; a fresh one when empty
	Tenant     string
	Harness    string // harness name; required
	Prompt     string
	Args       []string
	Env        map[string]string
	Model      string
	// Mode is the agent's mode (harness.Request.Mode): Claude Code's
	// permission mode, OpenCode's agent, an ACP session mode. A harness
	// without modes (harness.Moder) refuses one with InvalidArgument.
	Mode    string
	Auth    harness.Auth
	Options map[string]string
	// Approvals answers approval.requested events of the thread's earlier
	// runs: approval id (sandbox.ApprovalID) → allowed. The harness gets
	// them as harness.Request.Approvals. They are given here only: an
	// Options key "approvals" (the JSON the harnesses once decoded each on
	// their own) is refused with InvalidArgument.
	Approvals map[string]bool
	// MCPServers are MCP servers for this run only, besides the
	// definition's workspace servers (same rules: names unique across both,
	// secret references only in header and environment values, naming
	// workspace secrets). They are not part of the sandbox key.
	MCPServers []sandbox.MCPServer
	// Retention asks the stores to keep less of this run once it has
	// ended than its definition and the runner would (store.Retention):
	// the strictest of the three applies.
	Retention store.Retention
}

// ValidRunID reports whether id may name a run (StartRequest.ID).
func ValidRunID(id string) bool {
	if id == "" || len(id) > 128 || id[0] == '.' || id[0] == '-' {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// NewID returns a fresh, time-ordered id with a prefix.
func NewID(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%x-%s", prefix, time.Now().UnixMilli(), hex.EncodeToString(b))
}

// Start creates the run's record (so it can be found at once), claims it,
// and starts driving it in the background: ensure the sandbox, start the
// journaled agent, deliver its events. The run does not depend on ctx,
// which bounds only the start itself: a caller that goes away detaches.
func (r *Runner) Start(ctx context.Context, req StartRequest) (store.Run, error) {
	def, ok := r.defs[req.Definition]
	if !ok {
		return store.Run{}, sandbox.Errorf(sandbox.NotFound, "run.start", req.Definition, "unknown sandbox definition")
	}
	h, ok := r.harnesses[req.Harness]
	if !ok {
		return store.Run{}, sandbox.Errorf(sandbox.InvalidArgument, "run.start", req.Harness, "unknown harness")
	}
	if err := harness.CheckMode(h, req.Mode); err != nil {
		return store.Run{}, err
	}
	approvals, err := checkApprovals(req.Options, req.Approvals)
	if err != nil {
		return store.Run{}, err
	}
	req.Approvals = approvals
	if len(req.MCPServers) > 0 {
		var all []sandbox.MCPServer
		if def.Workspace != nil {
			all = slices.Clone(def.Workspace.MCPServers)
		}
		all = append(all, req.MCPServers...)
		if err := sandbox.ValidateMCPServers(all, def.Workspace.SecretsOrEmpty()); err != nil {
			return store.Run{}, err
		}
		req.MCPServers = slices.Clone(req.MCPServers)
	}
	if len(def.Workspace.SecretsOrEmpty().Brokered()) > 0 && r.opts.Broker == nil {
		return store.Run{}, errNoBroker(req.ID)
	}
	if err := r.checkEgress(def, req.ID); err != nil {
		return store.Run{}, err
	}
	if req.Thread == "" {
		req.Thread = NewID("thread")
	}
	id := req.ID
	if id == "" {
		id = NewID("run")
	} else if !ValidRunID(id) {
		return store.Run{}, sandbox.Errorf(sandbox.InvalidArgument, "run.start", id, "a run id is 1 to 128 letters, digits, '.', '_' or '-', not starting with '.' or '-'")
	}
	rec := store.Run{
		ID: id, ThreadID: req.Thread, Tenant: req.Tenant, DefinitionID: def.ID, Harness: h.Name(),
		Status: store.RunRunning, JournalNonce: journal.NewNonce(),
		SandboxKey: def.KeyFor(req.Thread, id, req.Tenant),
	}
	rec.Prompt = req.Prompt
	if !req.Retention.Valid() {
		return store.Run{}, sandbox.Errorf(sandbox.InvalidArgument, "run.start", id, "retention %q: want all, sandbox or none", req.Retention)
	}
	rec.Retention = Strictest(req.Retention, store.Retention(def.Retention), r.opts.Retention)
	rec.PolicyUnenforced = policyNotice(h, def, req, r.brokerFallbacks(def, id)) // what the harness cannot enforce of the policy, said at start
	if err := r.store.CreateRun(ctx, rec); err != nil {
		return store.Run{}, err
	}
	lease, err := r.store.Lock(ctx, leaseName(id), r.opts.LeaseTTL)
	if err != nil {
		return store.Run{}, err
	}
	claimed, err := r.store.ClaimRun(ctx, id, 0)
	if err != nil {
		_ = lease.Release(context.WithoutCancel(ctx))
		return store.Run{}, err
	}
	d := r.newDriver(claimed, def, h, lease)
	d.start = &req
	d.mu.Lock()
	d.startTail(0) // the log is empty: a follower that comes now needs no store read
	d.mu.Unlock()
	r.launch(d)
	return claimed, nil
}

// retiredOptionApprovals is the Options key that once carried approvals
// as JSON; StartRequest.Approvals carries them now.
const retiredOptionApprovals = "approvals"

// checkApprovals refuses approvals given as an option (they have one
// field: StartRequest.Approvals) and empty approval ids, and returns a
// copy of approvals the caller cannot change under the run.
func checkApprovals(options map[string]string, approvals map[string]bool) (map[string]bool, error) {
	if _, ok := options[retiredOptionApprovals]; ok {
		return nil, sandbox.Errorf(sandbox.InvalidArgument, "run.start", retiredOptionApprovals,
			"option %q is not accepted: give approval answers as approvals (the API's \"approvals\" field, the CLI's --approve and --deny)", retiredOptionApprovals)
	}
	if len(approvals) == 0 {
		return nil, nil
	}
	out := make(map[string]bool, len(approvals))
	for id, ok := range approvals {
		if strings.TrimSpace(id) == "" {
			return nil, sandbox.Errorf(sandbox.InvalidArgument, "run.start", "approvals", "empty approval id")
		}
		out[id] = ok
	}
	return out, nil
}

func leaseName(runID string) string { return "run-driver:" + runID }

func (r *Runner) launch(d *driver) {
	r.mu.Lock()
	r.drivers[d.run.ID] = d
	r.launched++
	r.mu.Unlock()
	r.driverGroup.Add(1)
	go func() {
		defer r.driverGroup.Done()
		d.drive()
		r.mu.Lock()
		if r.drivers[d.run.ID] == d {
			delete(r.drivers, d.run.ID)
		}
		r.mu.Unlock()
	}()
}

// DrivenTenant reports whether this process drives the run now, and the
// run's tenant if so (a run's tenant never changes), so a caller that
// only checks whom a run belongs to needs no store read for it.
func (r *Runner) DrivenTenant(runID string) (tenant string, ok bool) {
	if d := r.driving(runID); d != nil {
		return d.run.Tenant, true
	}
	return "", false
}

func (r *Runner) driving(runID string) *driver {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.drivers[runID]
}

// Detach stops driving a run in this process without stopping the run:
// what was translated is appended, the record gets DetachedSince, the
// lease is released, and any process can attach later. Detaching a run
// this process does not drive does nothing.
func (r *Runner) Detach(ctx context.Context, runID string) error {
	d := r.driving(runID)
	if d == nil {
		return nil
	}
	return d.detach(ctx)
}

// Close detaches every run this process drives (they go on without it) and
// waits for the drivers to stop.
func (r *Runner) Close(ctx context.Context) error {
	r.mu.Lock()
	ds := make([]*driver, 0, len(r.drivers))
	for _, d := range r.drivers {
		ds = append(ds, d)
	}
	r.mu.Unlock()
	for _, d := range ds {
		if err := d.detach(ctx); err != nil {
			r.log.Warn("run: detaching on close failed", "run", d.run.ID, "err", err)
		}
	}
	r.driverGroup.Wait()
	return nil
}

// Wait blocks until this process stops driving the run (it ended, was
// detached, or was taken over), or ctx ends.
func (r *Runner) Wait(ctx context.Context, runID string) error {
	d := r.driving(runID)
	if d == nil {
		return nil
	}
	select {
	case <-d.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitStarted blocks until the run's agent is running (its sandbox is
// ensured and its journal started) when this process drives the run, or
// until driving stopped. It returns at once for a run driven elsewhere.
func (r *Runner) WaitStarted(ctx context.Context, runID string) error {
	d := r.driving(runID)
	if d == nil {
		return nil
	}
	select {
	case <-d.started:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// previousSession is the session the agent of this run resumes: the
// thread's previous one, unless the harness keeps none.
func (d *driver) previousSession() string {
	if _, ok := d.h.(harness.Sessionless); ok {
		return ""
	}
	return d.r.previousSession(d.ctx, d.run)
}

// previousSession returns the agent session the thread's latest earlier run
// with the same harness reported (a session.started event), or "".
func (r *Runner) previousSession(ctx context.Context, cur store.Run) string {
	runs, err := r.store.ListRuns(ctx, store.RunFilter{ThreadID: cur.ThreadID, Tenant: cur.Tenant})
	if err != nil {
		return ""
	}
	for i := len(runs) - 1; i >= 0; i-- {
		prev := runs[i]
		if prev.ID == cur.ID || prev.Harness != cur.Harness {
			continue
		}
		evs, err := r.store.ReadEvents(ctx, prev.ID, 0, 0)
		if err != nil {
			return ""
		}
		for j := len(evs) - 1; j >= 0; j-- {
			if evs[j].Type != string(event.Custom) {
				continue
			}
			ev, err := event.Unmarshal(evs[j].Data)
			if err != nil || ev.Name != event.SessionStarted {
				continue
			}
			var s event.Session
			if json.Unmarshal(ev.Value, &s) == nil && s.ID != "" {
				return s.ID
			}
		}
		return ""
	}
	return ""
}

// Driving reports whether this process drives the run now.
func (r *Runner) Driving(runID string) bool { return r.driving(runID) != nil }

// DrivingCount is how many runs this process drives now.
func (r *Runner) DrivingCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.drivers)
}

// Activity reports how many runs this process drives now and how many
// drivers it has launched since it was made, so a caller that samples it
// sees a run that began and ended between two samples.
func (r *Runner) Activity() (driving int, launched uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.drivers), r.launched
}

// JournalDir is the journal directory inside sandboxes.
func (r *Runner) JournalDir() string {
	if r.opts.JournalDir == "" {
		return journal.DefaultDir
	}
	return r.opts.JournalDir
}
