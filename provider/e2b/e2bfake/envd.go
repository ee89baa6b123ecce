package e2bfake

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/provider/e2b"
	"github.com/d10ffeed/corral/provider/e2b/internal/envd/filesystem/filesystemconnect"
	pb "github.com/d10ffeed/corral/provider/e2b/internal/envd/process"
	"github.com/d10ffeed/corral/provider/e2b/internal/envd/process/processconnect"
)

type sbKey struct{}

// envdRoutes registers envd: the two Connect services and the plain
// endpoints, each behind the access-token check.
func (f *Fake) envdRoutes() {
	_, ph := processconnect.NewProcessHandler(&procService{f: f})
	_, fh := filesystemconnect.NewFilesystemHandler(&fsService{f: f})
	rpc := func(route, method string, h http.Handler) {
		f.Handle(route, "POST "+method, f.counted(f.envdAuth(h.ServeHTTP)))
	}
	rpc("start", processconnect.ProcessStartProcedure, ph)
	rpc("procConnect", processconnect.ProcessConnectProcedure, ph)
	rpc("list.processes", processconnect.ProcessListProcedure, ph)
	rpc("sendInput", processconnect.ProcessSendInputProcedure, ph)
	rpc("streamInput", processconnect.ProcessStreamInputProcedure, ph)
	rpc("closeStdin", processconnect.ProcessCloseStdinProcedure, ph)
	rpc("sendSignal", processconnect.ProcessSendSignalProcedure, ph)
	rpc("update", processconnect.ProcessUpdateProcedure, ph)
	rpc("stat", filesystemconnect.FilesystemStatProcedure, fh)
	rpc("makeDir", filesystemconnect.FilesystemMakeDirProcedure, fh)
	rpc("move", filesystemconnect.FilesystemMoveProcedure, fh)
	rpc("listDir", filesystemconnect.FilesystemListDirProcedure, fh)
	rpc("remove", filesystemconnect.FilesystemRemoveProcedure, fh)
	f.Handle("health", "GET /health", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := f.envdSandbox(r); !ok {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	f.Handle("files.read", "GET /files", f.counted(f.envdAuth(f.readFile)))
	f.Handle("files.write", "POST /files", f.counted(f.envdAuth(f.writeFile)))
}

// envdSandbox finds the sandbox a request to envd is for: the
// E2b-Sandbox-Id header, or a Host of <port>-<id>.<domain>.
func (f *Fake) envdSandbox(r *http.Request) (*sandbox, bool) {
	id := r.Header.Get(e2b.HeaderSandboxID)
	if id == "" {
		host, _, _ := strings.Cut(r.Host, ".")
		if p, rest, ok := strings.Cut(host, "-"); ok && p == strconv.Itoa(e2b.EnvdPort) {
			id = rest
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	sb, ok := f.sbs[id]
	if !ok || sb.paused {
		return nil, false
	}
	return sb, true
}

// envdAuth answers 502 for a sandbox that is gone or paused (as E2B's
// proxy does) and 401 without the sandbox's access token.
func (f *Fake) envdAuth(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sb, ok := f.envdSandbox(r)
		if !ok {
			writeError(w, http.StatusBadGateway, "The sandbox is not running or was not found")
			return
		}
		if r.Header.Get(e2b.HeaderAccessToken) != sb.token {
			writeError(w, http.StatusUnauthorized, "unauthorized access, please provide a valid access token or method signing if supported")
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), sbKey{}, sb)))
	}
}

func ctxSandbox(ctx context.Context) *sandbox { return ctx.Value(sbKey{}).(*sandbox) }

// resolve maps an envd path: absolute as it is, relative to the user's
// home (envd expands both that way).
func resolve(sb *sandbox, p string) string {
	if p == "" {
		return sb.fc.Home
	}
	if strings.HasPrefix(p, "~/") {
		p = filepath.Join(sb.fc.Home, p[2:])
	} else if !filepath.IsAbs(p) {
		p = filepath.Join(sb.fc.Home, p)
	}
	return filepath.Clean(p)
}

// fproc is one process envd started, with its output multiplexed to the
// streams attached to it.
type fproc struct {
	p   *fakecloud.Proc
	cfg *pb.ProcessConfig
	tag string

	mu      sync.Mutex
	subs    map[*sub]struct{}
	end     *pb.ProcessEvent_EndEvent
	outOff  chan struct{} // closed by SendSignal KILL/TERM: output forwarding stops (envd's outCancel)
	outOnce sync.Once
}

// stopOutput stops forwarding output, as envd does on SIGKILL and
// SIGTERM: the end event then follows the process's exit even when a
// grandchild still holds its output open.
func (fp *fproc) stopOutput() { fp.outOnce.Do(func() { close(fp.outOff) }) }

// retention is how long envd keeps an ended process's end event for
// Connect (terminatedRetentionTTL).
const retention = 30 * time.Second

// sub is one attached stream. A stream whose client is gone (ctx done)
// is skipped, so it never stalls the others.
type sub struct {
	ctx context.Context
	ch  chan *pb.ProcessEvent
}

// subBuffer is how many output events a stream may lag behind.
const subBuffer = 64

func (fp *fproc) attach(ctx context.Context) (*sub, *pb.ProcessEvent_EndEvent) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if fp.end != nil {
		return nil, fp.end
	}
	s := &sub{ctx: ctx, ch: make(chan *pb.ProcessEvent, subBuffer)}
	fp.subs[s] = struct{}{}
	return s, nil
}

func (fp *fproc) detach(s *sub) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	delete(fp.subs, s)
}

// publish hands ev to every attached stream, waiting for a slow one but
// never for one whose client is gone.
func (fp *fproc) publish(ev *pb.ProcessEvent) {
	fp.mu.Lock()
	subs := make([]*sub, 0, len(fp.subs))
	for s := range fp.subs {
		subs = append(subs, s)
	}
	fp.mu.Unlock()
	for _, s := range subs {
		select {
		case s.ch <- ev:
		case <-s.ctx.Done():
			fp.detach(s)
		}
	}
}

// pump reads the process's output until it ends (or forwarding is
// stopped), then publishes the end once the process exited.
func (fp *fproc) pump(sb *sandbox, pid int) {
	var wg sync.WaitGroup
	for i, rd := range []interface{ Read([]byte) (int, error) }{fp.p.Stdout(), fp.p.Stderr()} {
		wg.Go(func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := rd.Read(buf)
				if n > 0 {
					select {
					case <-fp.outOff:
						continue // drained, not forwarded
					default:
					}
					b := append([]byte(nil), buf[:n]...)
					d := &pb.ProcessEvent_DataEvent{}
					if i == 0 {
						d.Output = &pb.ProcessEvent_DataEvent_Stdout{Stdout: b}
					} else {
						d.Output = &pb.ProcessEvent_DataEvent_Stderr{Stderr: b}
					}
					fp.publish(&pb.ProcessEvent{Event: &pb.ProcessEvent_Data{Data: d}})
				}
				if err != nil {
					return
				}
			}
		})
	}
	outs := make(chan struct{})
	go func() { wg.Wait(); close(outs) }()
	select {
	case <-outs:
	case <-fp.outOff:
	}
	<-fp.p.Done()
	fp.p.Release()
	code := fp.p.ExitCode()
	end := &pb.ProcessEvent_EndEvent{ExitCode: int32(code), Exited: true, Status: fmt.Sprintf("exit status %d", code)}
	fp.mu.Lock()
	fp.end = end
	subs := fp.subs
	fp.subs = map[*sub]struct{}{}
	fp.mu.Unlock()
	for s := range subs {
		select {
		case s.ch <- &pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: end}}:
		case <-s.ctx.Done():
		}
		close(s.ch)
	}
	// envd keeps the end event for Connect for a while, then forgets.
	time.AfterFunc(retention, func() {
		sb.procsMu.Lock()
		delete(sb.procs, pid)
		sb.procsMu.Unlock()
	})
}

type procService struct {
	processconnect.UnimplementedProcessHandler
	f *Fake
}

func (ps *procService) find(sb *sandbox, sel *pb.ProcessSelector) (int, *fproc, error) {
	sb.procsMu.Lock()
	defer sb.procsMu.Unlock()
	switch s := sel.GetSelector().(type) {
	case *pb.ProcessSelector_Pid:
		if fp, ok := sb.procs[int(s.Pid)]; ok {
			return int(s.Pid), fp, nil
		}
		return 0, nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", s.Pid))
	case *pb.ProcessSelector_Tag:
		for pid, fp := range sb.procs {
			if fp.tag == s.Tag {
				return pid, fp, nil
			}
		}
		return 0, nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %s not found", s.Tag))
	}
	return 0, nil, connect.NewError(connect.CodeInvalidArgument, errors.New("invalid process selector"))
}

// Start starts a process and streams its events: start, data…, end.
func (ps *procService) Start(ctx context.Context, req *connect.Request[pb.StartRequest], stream *connect.ServerStream[pb.StartResponse]) error {
	sb := ctxSandbox(ctx)
	cfg := req.Msg.GetProcess()
	if cfg == nil || cfg.Cmd == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process config is required"))
	}
	env := make([]string, 0, len(sb.envVars)+len(cfg.Envs))
	for k, v := range sb.envVars {
		env = append(env, k+"="+v)
	}
	for k, v := range cfg.Envs {
		env = append(env, k+"="+v)
	}
	dir := resolve(sb, cfg.GetCwd())
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("error starting process: cwd '%s' does not exist", cfg.GetCwd()))
	}
	stdin := req.Msg.Stdin == nil || *req.Msg.Stdin
	p, err := sb.fc.Start(fakecloud.Spec{Argv: append([]string{cfg.Cmd}, cfg.Args...), Env: env, Dir: dir, Stdin: stdin})
	if err != nil {
		if errors.Is(err, fakecloud.ErrSandboxGone) {
			return connect.NewError(connect.CodeUnavailable, err)
		}
		return connect.NewError(connect.CodeInternal, fmt.Errorf("error starting process: %w", err))
	}
	pid := p.PID()
	if pid < 0 { // not found: envd runs through a shell in practice; keep the 127
		pid = 0
	}
	fp := &fproc{p: p, cfg: cfg, tag: req.Msg.GetTag(), subs: map[*sub]struct{}{}, outOff: make(chan struct{})}
	s, _ := fp.attach(ctx)
	if pid > 0 {
		sb.procsMu.Lock()
		sb.procs[pid] = fp
		sb.procsMu.Unlock()
	}
	go fp.pump(sb, pid)
	dropAfter, drop := fakecloud.StreamFault(ctx)
	return ps.serve(ctx, uint32(pid), s, func(ev *pb.ProcessEvent) error {
		return stream.Send(&pb.StartResponse{Event: ev})
	}, dropAfter, drop, fp)
}

// Connect attaches to a running process by pid or tag.
func (ps *procService) Connect(ctx context.Context, req *connect.Request[pb.ConnectRequest], stream *connect.ServerStream[pb.ConnectResponse]) error {
	sb := ctxSandbox(ctx)
	pid, fp, err := ps.find(sb, req.Msg.GetProcess())
	if err != nil {
		return err
	}
	s, end := fp.attach(ctx)
	if end != nil { // ended within the retention: its start and end
		if err := stream.Send(&pb.ConnectResponse{Event: &pb.ProcessEvent{Event: &pb.ProcessEvent_Start{Start: &pb.ProcessEvent_StartEvent{Pid: uint32(pid)}}}}); err != nil {
			return err
		}
		return stream.Send(&pb.ConnectResponse{Event: &pb.ProcessEvent{Event: &pb.ProcessEvent_End{End: end}}})
	}
	dropAfter, drop := fakecloud.StreamFault(ctx)
	return ps.serve(ctx, uint32(pid), s, func(ev *pb.ProcessEvent) error {
		return stream.Send(&pb.ConnectResponse{Event: ev})
	}, dropAfter, drop, fp)
}

// serve sends the start event and then what the process publishes. With
// an injected drop it aborts the connection after dropAfter bytes of
// output, as a dead proxy connection would.
func (ps *procService) serve(ctx context.Context, pid uint32, s *sub, send func(*pb.ProcessEvent) error, dropAfter int, drop bool, fp *fproc) error {
	defer fp.detach(s)
	if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Start{Start: &pb.ProcessEvent_StartEvent{Pid: pid}}}); err != nil {
		return err
	}
	sent := 0
	keep := time.NewTicker(30 * time.Second)
	defer keep.Stop()
	for {
		select {
		case ev, ok := <-s.ch:
			if !ok {
				return nil
			}
			if d := ev.GetData(); d != nil && drop {
				b := d.GetStdout()
				if b == nil {
					b = d.GetStderr()
				}
				if sent+len(b) >= dropAfter {
					fakecloud.NoteDrop(ctx)
					fp.detach(s)
					panic(http.ErrAbortHandler) // the connection drops mid-stream
				}
				sent += len(b)
			}
			if err := send(ev); err != nil {
				return err
			}
		case <-keep.C:
			if err := send(&pb.ProcessEvent{Event: &pb.ProcessEvent_Keepalive{Keepalive: &pb.ProcessEvent_KeepAlive{}}}); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// List lists the running processes.
func (ps *procService) List(ctx context.Context, _ *connect.Request[pb.ListRequest]) (*connect.Response[pb.ListResponse], error) {
	sb := ctxSandbox(ctx)
	sb.procsMu.Lock()
	defer sb.procsMu.Unlock()
	out := &pb.ListResponse{}
	for pid, fp := range sb.procs {
		if fp.p.Exited() {
			continue
		}
		info := &pb.ProcessInfo{Config: fp.cfg, Pid: uint32(pid)}
		if fp.tag != "" {
			info.Tag = &fp.tag
		}
		out.Processes = append(out.Processes, info)
	}
	return connect.NewResponse(out), nil
}

// SendInput writes to a process's stdin.
func (ps *procService) SendInput(ctx context.Context, req *connect.Request[pb.SendInputRequest]) (*connect.Response[pb.SendInputResponse], error) {
	_, fp, err := ps.find(ctxSandbox(ctx), req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if fp.p.Exited() {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("process not found"))
	}
	if _, err := fp.p.WriteStdin(req.Msg.GetInput().GetStdin()); err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error writing to stdin: %w", err))
	}
	return connect.NewResponse(&pb.SendInputResponse{}), nil
}

// CloseStdin sends EOF on a process's stdin.
func (ps *procService) CloseStdin(ctx context.Context, req *connect.Request[pb.CloseStdinRequest]) (*connect.Response[pb.CloseStdinResponse], error) {
	_, fp, err := ps.find(ctxSandbox(ctx), req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	fp.p.CloseStdin()
	return connect.NewResponse(&pb.CloseStdinResponse{}), nil
}

// SendSignal sends SIGTERM or SIGKILL to the one pid (envd's kill).
func (ps *procService) SendSignal(ctx context.Context, req *connect.Request[pb.SendSignalRequest]) (*connect.Response[pb.SendSignalResponse], error) {
	_, fp, err := ps.find(ctxSandbox(ctx), req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case pb.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	case pb.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("invalid signal: %v", req.Msg.GetSignal()))
	}
	fp.stopOutput()
	if err := fp.p.Signal(sig); err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error sending signal: %w", err))
	}
	return connect.NewResponse(&pb.SendSignalResponse{}), nil
}
