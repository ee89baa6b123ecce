// Package peer holds the side-by-side benchmark of corral and its closest
// peer, Rivet's sandbox-agent (issue 21): both daemons on one machine,
// against the same scripted model (internal/fakemodel), alternating run by
// run, measured by one client clock, printed as one table.
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
