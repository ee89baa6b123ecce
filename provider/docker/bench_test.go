package docker_test

// Benchmarks of corral's Docker provider against the floor: the same
// operation done with the fewest plain HTTP calls on the engine's unix
// socket (net/http, a hand-rolled hijack and frame demultiplexer, no SDK).
// Each BenchmarkX has the siblings X/corral and X/floor, which report the
// median of their iterations as p50-ms (X logs their ratio), and
// X/interleaved, which alternates the two and reports both medians and
// corral/floor: the number to read on a machine whose load changes.
//
//	go test -run '^$' -bench . -benchtime 10x ./provider/docker/

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/d10ffeed/corral/provider/docker"
	"github.com/d10ffeed/corral/sandbox"
)

// floor is a minimal Engine API client.
type floor struct {
	sock string
	ver  string // "v1.41"
	hc   *http.Client
}

func newFloor(b *testing.B) *floor {
	b.Helper()
	sock := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		if !strings.HasPrefix(h, "unix://") {
			b.Skipf("the floor speaks only to a unix socket; DOCKER_HOST=%s", h)
		}
		sock = strings.TrimPrefix(h, "unix://")
	}
	f := &floor{sock: sock, hc: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		MaxIdleConnsPerHost: 64,
	}}}
	resp, err := f.hc.Get("http://docker/_ping")
	if err != nil {
		b.Fatal(err)
	}
	_ = resp.Body.Close()
	f.ver = "v" + resp.Header.Get("Api-Version")
	return f
}

func (f *floor) call(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		buf, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, "http://docker/"+f.ver+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := f.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, msg)
	}
	if out != nil {
		return json.NewDecoder(resp.Body).Decode(out)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// containerConfig is the body corral's Create sends (as the floor sends
// it too, so that the comparison is of the layers, not the settings).
func containerConfig(image string) map[string]any {
	return map[string]any{
		"Image":      image,
		"Entrypoint": []string{"sh", "-c", `trap 'exit 0' TERM; while :; do sleep 3600 & wait; done`},
		"WorkingDir": "/workspace",
		"Labels":     map[string]string{docker.LabelManaged: "true", runLabel: runID},
		"HostConfig": map[string]any{
			"NetworkMode": "bridge", "SecurityOpt": []string{"no-new-privileges"}, "Init": true,
			"PidsLimit": docker.DefaultPidsLimit, "ExtraHosts": []string{"host.docker.internal:host-gateway"},
			"Memory": docker.DefaultMemory, "MemorySwap": docker.DefaultMemory,
			"CpuPeriod": 100_000, "CpuQuota": int64(docker.DefaultCPUs * 100_000),
		},
	}
}

func (f *floor) create(image string) (string, error) {
	var cr struct {
		ID string `json:"Id"`
	}
	if err := f.call("POST", "/containers/create?name=corral-floor-"+randomHex(6), containerConfig(image), &cr); err != nil {
		return "", err
	}
	return cr.ID, f.call("POST", "/containers/"+cr.ID+"/start", nil, nil)
}

func (f *floor) remove(id string) error {
	return f.call("DELETE", "/containers/"+id+"?force=1&v=1", nil, nil)
}

// exec runs cmd attached: create, start (hijacked, demultiplexed to EOF),
// inspect.
func (f *floor) exec(cid string, cmd []string, stdin []byte) (stdout []byte, code int, err error) {
	var cr struct {
		ID string `json:"Id"`
	}
	if err := f.call("POST", "/containers/"+cid+"/exec", map[string]any{
		"Cmd": cmd, "AttachStdout": true, "AttachStderr": true, "AttachStdin": stdin != nil,
	}, &cr); err != nil {
		return nil, 0, err
	}
	conn, err := net.Dial("unix", f.sock)
	if err != nil {
		return nil, 0, err
	}
	defer conn.Close()
	body := `{"Detach":false,"Tty":false}`
	if _, err := fmt.Fprintf(conn, "POST /%s/exec/%s/start HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: %d\r\n\r\n%s",
		f.ver, cr.ID, len(body), body); err != nil {
		return nil, 0, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, 0, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return nil, 0, fmt.Errorf("exec start: %s", resp.Status)
	}
	if stdin != nil {
		go func() {
			_, _ = conn.Write(stdin)
			_ = conn.(*net.UnixConn).CloseWrite()
		}()
	}
	var out, errb bytes.Buffer
	var hdr [8]byte
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, 0, err
		}
		w := &out
		if hdr[0] == 2 {
			w = &errb
		}
		if _, err := io.CopyN(w, br, int64(binary.BigEndian.Uint32(hdr[4:]))); err != nil {
			return nil, 0, err
		}
	}
	var ins struct{ ExitCode int }
	if err := f.call("GET", "/exec/"+cr.ID+"/json", nil, &ins); err != nil {
		return nil, 0, err
	}
	return out.Bytes(), ins.ExitCode, nil
}

func (f *floor) putFile(cid, dir, name string, data []byte) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg})
	_, _ = tw.Write(data)
	_ = tw.Close()
	req, err := http.NewRequest("PUT", "http://docker/"+f.ver+"/containers/"+cid+"/archive?path="+url.QueryEscape(dir), &buf)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-tar")
	resp, err := f.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("archive put: %s", resp.Status)
	}
	return nil
}

func (f *floor) getFile(cid, p string) ([]byte, error) {
	resp, err := f.hc.Get("http://docker/" + f.ver + "/containers/" + cid + "/archive?path=" + url.QueryEscape(p))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("archive get: %s", resp.Status)
	}
	tr := tar.NewReader(resp.Body)
	if _, err := tr.Next(); err != nil {
		return nil, err
	}
	return io.ReadAll(tr)
}

func (f *floor) commit(cid string) (string, error) {
	ref := "corral-floor-snapshot:" + randomHex(6)
	repo, tag, _ := strings.Cut(ref, ":")
	var res struct {
		ID string `json:"Id"`
	}
	return ref, f.call("POST", "/commit?container="+cid+"&repo="+repo+"&tag="+tag, map[string]any{}, &res)
}

func (f *floor) removeImage(ref string) error {
	return f.call("DELETE", "/images/"+ref, nil, nil)
}

// medians holds the p50 of each sub-benchmark's last run, by name.
var medians sync.Map

// timed runs op b.N times, timing each call, and reports the median.
func timed(b *testing.B, op func(b *testing.B)) {
	b.Helper()
	durs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		op(b)
		durs = append(durs, time.Since(start))
	}
	b.StopTimer()
	p50 := median(durs)
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(0, "ns/op")
	medians.Store(b.Name(), p50)
}

// pair runs the corral and floor siblings and logs their ratio. A third
// sibling, interleaved, alternates the two within each iteration (in a
// random order) so that a change of load on the machine during the run
// hits both alike; it reports both medians and their ratio.
func pair(b *testing.B, corral, floorOp func(b *testing.B)) {
	b.Run("corral", func(b *testing.B) { timed(b, corral) })
	b.Run("floor", func(b *testing.B) { timed(b, floorOp) })
	c, ok1 := medians.Load(b.Name() + "/corral")
	f, ok2 := medians.Load(b.Name() + "/floor")
	if ok1 && ok2 {
		b.Logf("corral/floor at the median: %.3f (%v / %v)", float64(c.(time.Duration))/float64(f.(time.Duration)), c, f)
	}
	b.Run("interleaved", func(b *testing.B) {
		var cd, fd []time.Duration
		var coin [1]byte
		for range b.N {
			_, _ = rand.Read(coin[:])
			ops := []func(*testing.B){corral, floorOp}
			durs := []*[]time.Duration{&cd, &fd}
			if coin[0]&1 == 1 {
				ops[0], ops[1] = ops[1], ops[0]
				durs[0], durs[1] = durs[1], durs[0]
			}
			for i, op := range ops {
				start := time.Now()
				op(b)
				*durs[i] = append(*durs[i], time.Since(start))
			}
		}
		b.StopTimer()
		mc, mf := median(cd), median(fd)
		b.ReportMetric(float64(mc.Microseconds())/1000, "corral-p50-ms")
		b.ReportMetric(float64(mf.Microseconds())/1000, "floor-p50-ms")
		b.ReportMetric(float64(mc)/float64(mf), "corral/floor")
		b.ReportMetric(0, "ns/op")
	})
}

func median(d []time.Duration) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	if len(d)%2 == 0 {
		return (d[len(d)/2-1] + d[len(d)/2]) / 2
	}
	return d[len(d)/2]
}

// cleanup collects work to do after the timed loop (or between
// iterations, with the timer stopped).
func untimed(b *testing.B, fn func()) {
	b.StopTimer()
	fn()
	b.StartTimer()
}

func benchProvider(b *testing.B) *docker.Provider {
	return newProvider(b, docker.Options{})
}

func BenchmarkCreateStartRemove(b *testing.B) {
	p := benchProvider(b)
	fl := newFloor(b)
	ctx := context.Background()
	pair(b, func(b *testing.B) {
		h, err := p.Create(ctx, sandbox.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if err := h.Destroy(ctx); err != nil {
			b.Fatal(err)
		}
	}, func(b *testing.B) {
		id, err := fl.create(testImage)
		if err != nil {
			b.Fatal(err)
		}
		if err := fl.remove(id); err != nil {
			b.Fatal(err)
		}
	})
}

// benchSandbox is one running sandbox both siblings use.
func benchSandbox(b *testing.B, p *docker.Provider) (sandbox.Handle, string) {
	h, err := p.Create(context.Background(), sandbox.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Destroy(context.Background()) })
	return h, containerID(b, h)
}

func BenchmarkExecTrue(b *testing.B) {
	p := benchProvider(b)
	fl := newFloor(b)
	h, cid := benchSandbox(b, p)
	ctx := context.Background()
	pair(b, func(b *testing.B) {
		res, err := h.Exec(ctx, sandbox.Command{Args: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
	}, func(b *testing.B) {
		if _, code, err := fl.exec(cid, []string{"true"}, nil); err != nil || code != 0 {
			b.Fatal(code, err)
		}
	})
}

func BenchmarkExec16Concurrent(b *testing.B) {
	p := benchProvider(b)
	fl := newFloor(b)
	h, cid := benchSandbox(b, p)
	ctx := context.Background()
	batch := func(b *testing.B, one func() error) {
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for range 16 {
			wg.Go(func() {
				if err := one(); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
	}
	pair(b, func(b *testing.B) {
		batch(b, func() error {
			res, err := h.Exec(ctx, sandbox.Command{Args: []string{"true"}})
			if err == nil && res.ExitCode != 0 {
				err = fmt.Errorf("exit %d", res.ExitCode)
			}
			return err
		})
	}, func(b *testing.B) {
		batch(b, func() error {
			_, code, err := fl.exec(cid, []string{"true"}, nil)
			if err == nil && code != 0 {
				err = fmt.Errorf("exit %d", code)
			}
			return err
		})
	})
}

// BenchmarkFile1MiB writes 1 MiB into the workspace and reads it back.
// The floor is the archive API (one PUT, one GET); floor-exec moves the
// bytes through two plain execs (cat with stdin, cat), the way corral does.
func BenchmarkFile1MiB(b *testing.B) {
	p := benchProvider(b)
	fl := newFloor(b)
	h, cid := benchSandbox(b, p)
	ctx := context.Background()
	data := make([]byte, 1<<20)
	_, _ = rand.Read(data)
	check := func(b *testing.B, got []byte) {
		if !bytes.Equal(got, data) {
			b.Fatalf("read back %d bytes, want %d", len(got), len(data))
		}
	}
	pair(b, func(b *testing.B) {
		if err := h.FS().WriteFile(ctx, "big.bin", data); err != nil {
			b.Fatal(err)
		}
		got, err := h.FS().ReadFile(ctx, "big.bin")
		if err != nil {
			b.Fatal(err)
		}
		check(b, got)
	}, func(b *testing.B) {
		if err := fl.putFile(cid, "/workspace", "floor.bin", data); err != nil {
			b.Fatal(err)
		}
		got, err := fl.getFile(cid, "/workspace/floor.bin")
		if err != nil {
			b.Fatal(err)
		}
		check(b, got)
	})
	b.Run("floor-exec", func(b *testing.B) {
		timed(b, func(b *testing.B) {
			if _, code, err := fl.exec(cid, []string{"sh", "-c", "cat > /workspace/floor2.bin"}, data); err != nil || code != 0 {
				b.Fatal(code, err)
			}
			got, code, err := fl.exec(cid, []string{"cat", "/workspace/floor2.bin"}, nil)
			if err != nil || code != 0 {
				b.Fatal(code, err)
			}
			check(b, got)
		})
	})
	if c, ok := medians.Load(b.Name() + "/corral"); ok {
		if f, ok := medians.Load(b.Name() + "/floor-exec"); ok {
			b.Logf("corral/floor-exec at the median: %.3f", float64(c.(time.Duration))/float64(f.(time.Duration)))
		}
	}
}

// BenchmarkFileWrite1MiB writes 1 MiB into the workspace, replacing the
// file of the last iteration. The floor is one archive PUT.
func BenchmarkFileWrite1MiB(b *testing.B) {
	p := benchProvider(b)
	fl := newFloor(b)
	h, cid := benchSandbox(b, p)
	ctx := context.Background()
	data := make([]byte, 1<<20)
	_, _ = rand.Read(data)
	pair(b, func(b *testing.B) {
		if err := h.FS().WriteFile(ctx, "big.bin", data); err != nil {
			b.Fatal(err)
		}
	}, func(b *testing.B) {
		if err := fl.putFile(cid, "/workspace", "floor.bin", data); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("floor-exec", func(b *testing.B) {
		timed(b, func(b *testing.B) {
			if _, code, err := fl.exec(cid, []string{"sh", "-c", "cat > /workspace/floor2.bin"}, data); err != nil || code != 0 {
				b.Fatal(code, err)
			}
		})
	})
}

// BenchmarkCommit1MiB commits a container holding a 1 MiB file.
func BenchmarkCommit1MiB(b *testing.B) {
	p := benchProvider(b)
	fl := newFloor(b)
	h, cid := benchSandbox(b, p)
	ctx := context.Background()
	data := make([]byte, 1<<20)
	_, _ = rand.Read(data)
	if err := h.FS().WriteFile(ctx, "big.bin", data); err != nil {
		b.Fatal(err)
	}
	pair(b, func(b *testing.B) {
		snap, err := h.Snapshot(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		untimed(b, func() { _ = fl.removeImage(snap.ID) })
	}, func(b *testing.B) {
		ref, err := fl.commit(cid)
		if err != nil {
			b.Fatal(err)
		}
		untimed(b, func() { _ = fl.removeImage(ref) })
	})
}

// BenchmarkFork forks a container holding a 1 MiB file: commit, create,
// start.
func BenchmarkFork(b *testing.B) {
	p := benchProvider(b)
	fl := newFloor(b)
	h, cid := benchSandbox(b, p)
	ctx := context.Background()
	data := make([]byte, 1<<20)
	_, _ = rand.Read(data)
	if err := h.FS().WriteFile(ctx, "big.bin", data); err != nil {
		b.Fatal(err)
	}
	pair(b, func(b *testing.B) {
		f, err := h.Fork(ctx)
		if err != nil {
			b.Fatal(err)
		}
		untimed(b, func() {
			if err := f.Destroy(ctx); err != nil {
				b.Fatal(err)
			}
		})
	}, func(b *testing.B) {
		ref, err := fl.commit(cid)
		if err != nil {
			b.Fatal(err)
		}
		id, err := fl.create(ref)
		if err != nil {
			b.Fatal(err)
		}
		untimed(b, func() {
			_ = fl.remove(id)
			_ = fl.removeImage(ref)
		})
	})
}
