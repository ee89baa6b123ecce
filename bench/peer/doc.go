// Package peer holds the side-by-side benchmark of corral and its closest
// peer, Rivet's sandbox-agent (issue 21): both daemons on one machine,
// against the same scripted model (internal/fakemodel), alternating run by
// run, measured by one client clock, printed as one table.
//
// Each side is driven through its own API as an interactive client would
// use it: corral's runs are started and followed on one request (POST
// /v1/runs streaming its events, client.StartEvents); sandbox-agent's
// turns are prompts on an ACP connection whose event stream is already
// open, its commands a start request and a log stream.
//
// The benchmark is a test behind the build tag peerbench, so that
// "go test ./..." and CI never run it. Run it with bench/peer/run.sh,
// which installs sandbox-agent from npm into a cache directory, builds
// corral and runs:
//
//	go test -tags peerbench -run TestPeerTable -v -timeout 30m ./bench/peer/
//
// with PEER_NPM_DIR naming the npm prefix that holds sandbox-agent and its
// ACP adapters, and CORRAL_BIN the corral binary.
package peer
