// Package cloudflare is corral's provider for Cloudflare Sandbox
// (@cloudflare/sandbox). A Cloudflare sandbox is a Durable Object with a
// container behind it and exists only inside a Worker, so the provider
// talks to a small Worker shipped in bridge/ (TypeScript, deployed with
// wrangler deploy), which exports the Sandbox Durable Object and serves an
// authenticated HTTP + WebSocket API. bridge/README.md specifies that API
// and says how to deploy the bridge (BRIDGE_TOKEN is its secret) and point
// corral at it (corral.yaml provider.cloudflare: {url, tokenEnv}, or
// CORRAL_CLOUDFLARE_URL and CORRAL_CLOUDFLARE_TOKEN).
//
// # Wire calls
//
//	GET    /v1/health                 Ping
//	POST   /v1/sandboxes {"id","labels"}   Create (the id is the Durable Object name: the key, or a cleaned
//	                                  prefix and digest of it, with the key in label corral.key)
//	GET    /v1/sandboxes/{id}         Resume; Create's reconciliation after an unknown outcome
//	GET    /v1/sandboxes?label=corral=1    ListSandboxes, Prune
//	DELETE /v1/sandboxes/{id}         Destroy (the SDK's destroy(); a gone sandbox is fine)
//	POST   /v1/sandboxes/{id}/env     SetEnv (the SDK's setEnvVars; the values also travel with each command)
//	GET    /v1/sandboxes/{id}/exec    WebSocket: Exec, Spawn, the file system (sandbox/execfs) and the kill
//
// Everything else is the kit's: provider/cloudhttp (auth, deadlines,
// retries with Retry-After, status → code, create reconciliation),
// sandbox/execproc (the pid-reporting wrapper, bounded output, timeouts,
// the group kill), sandbox/execfs.
//
// # Capabilities and differences from the reference
//
// fs, exec, env, backgroundProcesses and killableProcesses. The reference
// (TanStack's cloudflareSandbox) is not killable: it forwards no
// AbortSignal (Workers RPC cannot carry one) and its kill() is a no-op.
// The bridge instead starts every command under setsid -w, so the
// wrapper's pid leads a process group, and the kill is execproc's group
// kill, a kill script run as a second command over the same exec API.
// sandboxtest's KillMeasured case passes against the fake (whose
// commands are session leaders, as the bridge's are); against the real
// service the claim rests on setsid being in the container image
// (util-linux in cloudflare/sandbox), which only the live suite can show.
//
// Not writableStdin: the SDK's exec takes no stdin, so the bridge buffers
// an Exec's stdin until eof and stages it in a file (the file system's
// writes go this way); a spawned command reads /dev/null. Not
// durableFilesystem: a cold start may wipe the container's disk, and
// corral's ensure re-bootstraps. No snapshots, fork or network policy
// (NetworkDeny is ignored, as the contract asks of providers without the
// flag), and no ports: exposePort needs a custom domain with wildcard DNS
// (workers.dev has none). The reference's fs is base64 over exec; corral's
// is execfs over the exec WebSocket. The reference cannot list sandboxes;
// the bridge keeps an index Durable Object for corral's listing and prune
// (state "unknown": the bridge cannot tell running from idle, so prune with
// KeepRunning keeps every sandbox).
//
// Output arrives from the SDK as text: bytes that are not valid UTF-8 do
// not survive the real bridge (the fake passes bytes through). A dropped
// exec socket is Unavailable at once: the SDK's exec leaves no process
// table to ask for the exit code.
//
// # Tests
//
// cloudflarefake is the bridge's API on internal/fakecloud with real
// processes; sandboxtest, journaltest and runtest (memory and SQLite) run
// against it. TestBridgeBuild type-checks the bridge and bundles it with
// wrangler deploy --dry-run; TestBridgeDev runs it under wrangler dev
// (workerd, offline, containers disabled: no container image can be
// pulled here) and drives it with this provider. TestLive runs the suites
// against a deployed bridge when CORRAL_CLOUDFLARE_URL and
// CORRAL_CLOUDFLARE_TOKEN are set.
package cloudflare
