package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/d10ffeed/corral/api"
	"github.com/d10ffeed/corral/config"
	"github.com/d10ffeed/corral/internal/lean"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/server"
	"github.com/d10ffeed/corral/store"
	"github.com/spf13/cobra"
)

func newServeCmd() *cobra.Command {
	var (
		listen     string
		gwListen   string
		storeURL   string
		configs    []string
		tokens     []string
		interval   time.Duration
		ttl        time.Duration
		noAuth     bool
		agentTools bool
		hosts      []string
		origins    []string

		retention   string
		eventMaxAge time.Duration
		ckKeep      int
		ckMaxAge    time.Duration
		maxStarts   int
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon: HTTP/SSE API, web page and metrics",
		Long: `Run corral's daemon. It serves the HTTP API (runs, events as Server-Sent
Events, cancel, sandboxes), a web page at /, /healthz and /metrics, and runs
the reaper. Several daemons may share one PostgreSQL store (--store
postgres://…): clients reconnect to any of them, and a daemon takes over the
runs of one that died.

The API and /metrics need a bearer token. Without --token the daemon makes one on
its first start, keeps it in ` + displayStateDir() + `/` + api.TokenFileName + ` (owner-only)
and reuses it; it prints the web page's address with the token, and the CLI
(--server on loopback) reads it from there. Without --token it listens on
loopback only. --no-auth serves without a token (loopback only; any process
or user of this machine can then run commands as you). Whatever the auth,
the daemon answers only to its own names (loopback, the address it listens
on, --allow-host), refuses browser requests from other origins (but
--allow-origin) and takes writes as application/json only, so a web page you
visit cannot use it.`,
		Example: `  corral serve
  corral serve --listen 0.0.0.0:7777 --store postgres://corral@db/corral --token s3cret=acme --config app.yaml --allow-host corral.acme.dev`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			toks, err := parseTokens(tokens)
			if err != nil {
				return err
			}
			if noAuth && len(toks) > 0 {
				return errors.New("--no-auth and --token (or CORRAL_TOKENS) contradict each other")
			}
			if err := server.CheckListen(listen, toks); err != nil {
				return err
			}
			if noAuth {
				fmt.Fprintln(cmd.ErrOrStderr(), "corral: WARNING: --no-auth: this daemon needs no token; any process or user on this machine can run commands through it as you")
			}
			var pageToken, tokenNote string
			if !noAuth && len(toks) == 0 {
				path, err := api.TokenPath()
				if err != nil {
					return err
				}
				tok, created, err := server.LoadOrCreateToken(path)
				if err != nil {
					return err
				}
				toks, pageToken = map[string]string{tok: ""}, tok
				tokenNote = "token kept in " + path
				if created {
					tokenNote = "token made and kept in " + path
				}
			}
			defs, err := loadDefinitions(configs)
			if err != nil {
				return err
			}
			metrics := server.NewMetrics()
			ids := make([]string, len(defs))
			for i, d := range defs {
				d.Provider = sandbox.Guard(d.Provider, sandbox.GuardOptions{Decorate: metrics.Decorator(d.Provider.Name())})
				ids[i] = d.ID
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			sf := stateFlags{storeURL: storeURL}
			st, err := sf.openStore(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			var rp atomic.Pointer[run.Runner]
			g, err := startGateway(ctx, st, defs, gwListen, cmd.ErrOrStderr(), &rp)
			if err != nil {
				return err
			}
			var broker run.Broker
			if g != nil {
				broker = g
				for _, d := range defs {
					printBrokered(cmd.ErrOrStderr(), d, "served by this daemon on "+gwListen+" (and the docker0 bridge)")
				}
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			defer ln.Close()
			// The agents' checkpoint tools: a per-run token under the
			// state directory's key, the daemon's address as sandboxes
			// reach it.
			var tools *server.AgentTools
			var toolsLn net.Listener
			if agentTools {
				key, err := daemonKey()
				if err != nil {
					return err
				}
				var reach map[string]string
				reach, toolsLn = agentToolsReach(ln.Addr(), cmd.ErrOrStderr())
				for _, p := range slices.Sorted(maps.Keys(reach)) {
					fmt.Fprintf(cmd.ErrOrStderr(), "corral: agent tools: %s sandboxes reach their checkpoint tools at %s (a per-run token each)\n", p, reach[p])
				}
				if tools, err = server.NewAgentTools(key, reach, logger()); err != nil {
					return err
				}
			}
			ropts := run.Options{Logger: logger(), OnEnsure: metrics.ObserveEnsure, OnTakeOver: metrics.ObserveTakeOver,
				Retention: store.Retention(retention), Broker: broker, MaxLocalStarts: maxStarts}
			if tools != nil {
				ropts.Tools = tools
			}
			r, err := run.New(st, defs, allHarnesses(), ropts)
			if err != nil {
				return err
			}
			rp.Store(r)
			srv, err := server.New(server.Options{Runner: r, Definitions: ids, Harnesses: harnessNames(), Tokens: toks, NoAuth: noAuth,
				AllowedHosts: hosts, AllowedOrigins: origins, Logger: logger(), ReapInterval: interval, ReapTTL: ttl, Metrics: metrics,
				Forget: run.ForgetOptions{EventMaxAge: eventMaxAge, CheckpointKeep: ckKeep, CheckpointMaxAge: ckMaxAge}, Tools: tools})
			if err != nil {
				return err
			}
			if toolsLn != nil {
				serveUntil(ctx, toolsLn, srv.ToolsHandler())
			}
			hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
			go srv.Reap(ctx)
			errc := make(chan error, 1)
			go func() { errc <- hs.Serve(ln) }()
			// Start-up is over: give back the code and data pages only the
			// init functions needed, and again a second after the daemon has
			// gone idle (no run driven here) and each minute it stays so, so
			// an idle daemon keeps about 13–16 MB resident instead of 25–31
			// (see internal/lean).
			lean.Trim()
			go trimWhenIdle(ctx, r.Activity, func() { lean.Trim() }, func() int64 {
				kb, _ := lean.StatusKB(0, "VmRSS")
				return kb << 10
			})
			fmt.Fprintf(cmd.ErrOrStderr(), "corral: serving on http://%s (definitions: %s)\n", ln.Addr(), strings.Join(ids, ", "))
			if pageToken != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "corral: open the web page at http://%s/?token=%s (%s; corral run --server reads it from there)\n", ln.Addr(), pageToken, tokenNote)
			}
			select {
			case err := <-errc:
				return err
			case <-ctx.Done():
			}
			// Stop accepting, let streams end, and leave running runs
			// detached for another replica (or this one after a restart).
			sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			_ = hs.Shutdown(sctx)
			if err := r.Close(sctx); err != nil {
				return err
			}
			fmt.Fprintln(cmd.ErrOrStderr(), "corral: stopped; running runs are detached")
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:7777", "address to listen on")
	cmd.Flags().StringVar(&gatewayPublicURL, "gateway-public-url", gatewayPublicURL, "a URL at which you expose the egress gateway (a tunnel, an ingress) for remote sandboxes' brokered secrets (env CORRAL_GATEWAY_PUBLIC_URL)")
	cmd.Flags().StringVar(&gwListen, "gateway-listen", gatewayListen, "the egress gateway's loopback address, for brokered secrets (its port is also served on the docker0 bridge)")
	cmd.Flags().StringVar(&storeURL, "store", "", "state store: sqlite:PATH (default under "+displayStateDir()+") or postgres://…")
	cmd.Flags().StringArrayVar(&configs, "config", nil, "a sandbox definition file (repeatable; default ./"+config.DefaultFile+" or the built-in local definition)")
	cmd.Flags().StringArrayVar(&tokens, "token", nil, "an auth token and its tenant, `TOKEN=TENANT` (repeatable); also CORRAL_TOKENS=t1=a,t2=b")
	cmd.Flags().BoolVar(&noAuth, "no-auth", false, "serve without a token (loopback only; any local process or user can then run commands as you)")
	cmd.Flags().StringArrayVar(&hosts, "allow-host", nil, "a name the daemon answers to besides loopback and its listen address (the Host header; `NAME` or NAME:PORT, repeatable; \"*\" for any)")
	cmd.Flags().StringArrayVar(&origins, "allow-origin", nil, "a browser origin allowed to call the API besides the daemon's own page (`URL` such as https://ops.acme.dev, repeatable)")
	cmd.Flags().DurationVar(&interval, "reap-interval", time.Minute, "how often the reaper runs")
	cmd.Flags().DurationVar(&ttl, "ttl", 30*time.Minute, "cancel runs nobody watched for this long (negative: never)")
	cmd.Flags().StringVar(&retention, "retention", "all", "what the store keeps of ended runs: all, sandbox (no prompt, no event text) or none (nothing); a definition may ask for less")
	cmd.Flags().DurationVar(&eventMaxAge, "event-max-age", 0, "delete the events of runs that ended longer ago than this (0: keep them)")
	cmd.Flags().BoolVar(&agentTools, "agent-tools", true, "give each run's agent the checkpoint tools (an MCP server named "+run.AgentToolsServer+" with a token good only for its own run's tools while it lives); --agent-tools=false turns them off")
	cmd.Flags().IntVar(&maxStarts, "max-local-starts", 0, "how many runs on the local provider may be starting at once (sandbox ensure, setup steps, the agent's spawn); the others wait their turn (0: twice the CPUs; -1: no bound — for definitions whose setup steps run long)")
	checkpointRetentionFlags(cmd, &ckKeep, &ckMaxAge)
	return cmd
}

func parseTokens(flags []string) (map[string]string, error) {
	all := append([]string{}, flags...)
	if env := os.Getenv("CORRAL_TOKENS"); env != "" {
		all = append(all, strings.Split(env, ",")...)
	}
	out := map[string]string{}
	for _, kv := range all {
		tok, tenant, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || tok == "" || tenant == "" {
			return nil, errors.New("--token wants TOKEN=TENANT (a token and the tenant it acts for)")
		}
		out[tok] = tenant
	}
	return out, nil
}

func loadDefinitions(paths []string) ([]*sandbox.Definition, error) {
	if len(paths) == 0 {
		paths = []string{""}
	}
	var defs []*sandbox.Definition
	seen := map[string]bool{}
	for _, p := range paths {
		sf := stateFlags{config: p}
		d, err := sf.definition()
		if err != nil {
			return nil, err
		}
		if seen[d.ID] {
			return nil, fmt.Errorf("two definitions with the id %q", d.ID)
		}
		seen[d.ID] = true
		defs = append(defs, d)
	}
	return defs, nil
}

// Idle trimming: the daemon trims (lean.Trim) once it has driven no run
// for trimSettle, sampled every trimTick, and again every trimEvery while
// it stays idle.
const (
	trimTick   = 500 * time.Millisecond
	trimSettle = time.Second
	trimEvery  = time.Minute
	trimRegrow = 2 << 20
)

// trimWhenIdle trims the daemon's resident memory (trim, lean.Trim) when
// it goes idle: activity (Runner.Activity) has shown no run driven and no
// driver launched for trimSettle since the last run, and then every
// trimEvery while it stays idle, and again whenever, idle, the resident
// size (rss, in bytes) has grown by trimRegrow since the last trim (work
// that finished after the trim — a run's clean-up, a keeper's watcher —
// left pages behind: seen as 23–24 MB two seconds after a benchmark's runs,
// against 15 MB once trimmed again). The next request faults back the
// pages it needs from the page cache (about a millisecond of minor
// faults).
func trimWhenIdle(ctx context.Context, activity func() (int, uint64), trim func(), rss func() int64) {
	t := time.NewTicker(trimTick)
	defer t.Stop()
	_, seen := activity()
	busy := false // a run was seen since the last trim
	var quiet, since time.Duration
	var after int64 // the resident size right after the last trim (0: none yet)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, launched := activity()
		if n > 0 || launched != seen {
			seen, busy, quiet = launched, true, 0
			continue
		}
		quiet += trimTick
		since += trimTick
		regrown := after > 0 && quiet >= trimSettle && rss() > after+trimRegrow
		if busy && quiet >= trimSettle || since >= trimEvery || regrown {
			trim()
			busy, since, after = false, 0, rss()
		}
	}
}
