// Package fakecloud is the kit corral's fake cloud backends are built
// from: a loopback HTTP server for tests whose sandboxes are real
// processes on the host, with the kill semantics of the backend a fake
// imitates and faults that a test injects per route.
//
// A fake for one backend (E2B, Daytona, Vercel, the reference provider's
// protocol in provider/internal/refcloud) is a Server plus the backend's
// own routes and JSON:
//
//	s, err := fakecloud.New(fakecloud.Options{Token: "t", Kill: fakecloud.PIDOnly})
//	s.Handle("create", "POST /v1/sandboxes", func(w http.ResponseWriter, r *http.Request) {
//		var req struct{ Name string }
//		if err := fakecloud.DecodeJSON(r, &req); err != nil {
//			fakecloud.WriteError(w, http.StatusBadRequest, "%v", err)
//			return
//		}
//		sb, err := s.CreateSandbox(req.Name, nil)
//		…
//		fakecloud.WriteJSON(w, http.StatusCreated, …)
//	})
//
// # The server
//
// New starts an httptest server on 127.0.0.1. Every route is registered
// under a name (Handle), which is what faults and counters refer to. Every
// answer carries a request id (X-Request-Id: req-N); with Options.Token set
// a request without "Authorization: Bearer <token>" is answered 401 before
// any route runs. WriteJSON, WriteError and DecodeJSON are the REST
// helpers (error bodies are {"message": …, "status": N}); AcceptWebSocket
// upgrades a request with github.com/coder/websocket.
//
// # Sandboxes are real processes
//
// CreateSandbox makes one directory under Options.BaseDir with the rules
// of provider/local: the directory is the sandbox's identity on the host,
// every process started in it carries CORRAL_SANDBOX_ID=<directory> in its
// environment (local.SandboxIDEnv), and DeleteSandbox kills every process
// it started and then has provider/local's Destroy find whatever else
// carries the marker (a daemon that left its group), kill it, and remove
// the directory. Inside it, Root (the workspace) and Home are
// directories of their own.
//
// Sandbox.Start starts argv verbatim, as a process API does: an absolute
// working directory, the environment laid over a minimal default (PATH,
// HOME, LANG and the marker), a new session so that the pid leads its own
// process group, stdout and stderr as pipes, stdin as a pipe with EOF
// (CloseStdin) or /dev/null, and the exit code with 128+N for signal N.
// A program that is not found exits 127 with a shell's message.
//
// # Kill semantics
//
// Options.Kill chooses what Proc.Signal and a dropped connection do,
// after the backend the fake imitates:
//
//   - GroupKill: Signal sends the signal to the process group, so a
//     backgrounded grandchild dies with its parent.
//   - PIDOnly: Signal reaches the one pid (E2B's envd sends SIGKILL to a
//     single process); a backgrounded grandchild survives it.
//   - KillOnDisconnect: Signal reaches the one pid, and the group gets
//     SIGKILL when the connection that streams the process drops
//     (Proc.Disconnected, called by the fake's stream handler).
//
// # Faults
//
// Inject adds a fault to a route: a burst of N answers with a status
// (429 with Retry-After, 5xx), an answer that comes only after a delay, a
// request that is handled (the sandbox is made) and then answered with a
// status instead (a create that answers 504), or, for streaming routes, a
// socket dropped after K bytes of output (StreamFault tells the handler).
// Each fault applies to a bounded number of requests and counts its hits;
// Count reports every request a route got. A delay never decides a test's
// verdict: it ends early when the client goes away, and a test checks the
// error the client reports, not the time it took.
package fakecloud
