package railwayfake

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/coder/websocket"
)

// Binary frame types of the files socket (the SDK's files-ws-client): a
// 12-byte header (request id u16, type u16, seq u32, length u32), then
// the payload.
const (
	frameReadChunk  = 1
	frameReadEnd    = 2
	frameWriteChunk = 3
	frameWriteEnd   = 4
	headerBytes     = 12
	readChunk       = 64 << 10
)

type fileEntry struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	Mode    uint32 `json:"mode"`
	IsDir   bool   `json:"isDir"`
	ModTime string `json:"modTime"`
}

func entryOf(name string, fi fs.FileInfo) fileEntry {
	return fileEntry{Name: name, Size: fi.Size(), Mode: uint32(fi.Mode()), IsDir: fi.IsDir(), ModTime: fi.ModTime().UTC().Format(time.RFC3339)}
}

func binFrame(id uint16, typ uint16, seq uint32, payload []byte) []byte {
	b := make([]byte, headerBytes+len(payload))
	binary.BigEndian.PutUint16(b[0:], id)
	binary.BigEndian.PutUint16(b[2:], typ)
	binary.BigEndian.PutUint32(b[4:], seq)
	binary.BigEndian.PutUint32(b[8:], uint32(len(payload)))
	copy(b[headerBytes:], payload)
	return b
}

// errText is the message Railway's files service gives for err (the SDK
// maps "no such file"/"not found" to SandboxFileNotFoundError).
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + " " + pe.Path + ": " + pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Op + " " + le.Old + " " + le.New + ": " + le.Err.Error()
	}
	return err.Error()
}

type upload struct {
	f    *os.File
	path string
	mode os.FileMode
}

func (f *Fake) filesWS(w http.ResponseWriter, r *http.Request) {
	c, st, ok := f.accept(w, r, "files:read")
	if !ok {
		return
	}
	defer f.release(st.sandbox)
	defer c.CloseNow()
	ctx := r.Context()
	f.mu.Lock()
	b := f.boxes[st.sandbox]
	f.mu.Unlock()
	if b == nil {
		return
	}
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return filepath.Join(b.sb.Home, p)
	}
	canWrite := func() bool { return st.scope == "files:read files:write" }
	uploads := map[uint16]*upload{}
	defer func() {
		for _, u := range uploads {
			u.f.Close()
		}
	}()
	reply := func(typ, id string, data any) error {
		return c.Write(ctx, websocket.MessageText, mustJSON(map[string]any{"type": typ, "id": id, "data": data}))
	}
	fail := func(id string, err error) error { return reply("error", id, map[string]any{"message": errText(err)}) }
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			return
		}
		f.touch(st.sandbox)
		if typ == websocket.MessageBinary {
			if len(data) < headerBytes {
				continue
			}
			id := binary.BigEndian.Uint16(data[0:])
			ft := binary.BigEndian.Uint16(data[2:])
			n := binary.BigEndian.Uint32(data[8:])
			payload := data[headerBytes:]
			if int(n) < len(payload) {
				payload = payload[:n]
			}
			u := uploads[id]
			if u == nil {
				continue
			}
			if _, err := u.f.Write(payload); err != nil {
				delete(uploads, id)
				u.f.Close()
				_ = fail(itoa(id), err)
				continue
			}
			if ft == frameWriteEnd {
				delete(uploads, id)
				err := u.f.Close()
				if err == nil && u.mode != 0 {
					err = os.Chmod(u.path, u.mode)
				}
				if err != nil {
					_ = fail(itoa(id), err)
				} else {
					_ = reply("ok", itoa(id), map[string]any{})
				}
			}
			continue
		}
		var m struct {
			Type string          `json:"type"`
			ID   string          `json:"id"`
			Data json.RawMessage `json:"data"`
		}
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		var a struct {
			Path   string `json:"path"`
			Old    string `json:"old"`
			New    string `json:"new"`
			Offset int64  `json:"offset"`
			Length int64  `json:"length"`
			Mode   uint32 `json:"mode"`
		}
		_ = json.Unmarshal(m.Data, &a)
		writeOp := m.Type == "mkdir" || m.Type == "rm" || m.Type == "rename" || m.Type == "write_start"
		if writeOp && !canWrite() {
			_ = fail(m.ID, errors.New("permission denied: token lacks files:write"))
			continue
		}
		switch m.Type {
		case "ls":
			ents, err := os.ReadDir(abs(a.Path))
			if err != nil {
				_ = fail(m.ID, err)
				continue
			}
			out := []fileEntry{}
			for _, e := range ents {
				if fi, err := e.Info(); err == nil {
					out = append(out, entryOf(e.Name(), fi))
				}
			}
			_ = reply("ok", m.ID, map[string]any{"entries": out})
		case "stat":
			fi, err := os.Stat(abs(a.Path))
			if err != nil {
				_ = fail(m.ID, err)
				continue
			}
			_ = reply("ok", m.ID, entryOf(fi.Name(), fi))
		case "mkdir":
			if err := os.MkdirAll(abs(a.Path), 0o755); err != nil {
				_ = fail(m.ID, err)
				continue
			}
			_ = reply("ok", m.ID, map[string]any{})
		case "rm":
			if err := os.Remove(abs(a.Path)); err != nil {
				_ = fail(m.ID, err)
				continue
			}
			_ = reply("ok", m.ID, map[string]any{})
		case "rename":
			if err := os.Rename(abs(a.Old), abs(a.New)); err != nil {
				_ = fail(m.ID, err)
				continue
			}
			_ = reply("ok", m.ID, map[string]any{})
		case "read":
			f.readFile(ctx, c, m.ID, abs(a.Path), a.Offset, a.Length, fail)
		case "write_start":
			p := abs(a.Path)
			fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			if err != nil {
				_ = fail(m.ID, err)
				continue
			}
			uploads[atou(m.ID)] = &upload{f: fh, path: p, mode: os.FileMode(a.Mode & 0o7777)}
			_ = reply("write_ready", m.ID, map[string]any{})
		default:
			_ = fail(m.ID, errors.New("unknown operation "+m.Type))
		}
	}
}

func (f *Fake) readFile(ctx context.Context, c *websocket.Conn, id, path string, off, length int64, fail func(string, error) error) {
	fh, err := os.Open(path)
	if err != nil {
		_ = fail(id, err)
		return
	}
	defer fh.Close()
	if fi, err := fh.Stat(); err == nil && fi.IsDir() {
		_ = fail(id, errors.New("read "+path+": is a directory"))
		return
	}
	if _, err := fh.Seek(off, io.SeekStart); err != nil {
		_ = fail(id, err)
		return
	}
	rid := atou(id)
	var seq uint32
	left := length
	buf := make([]byte, readChunk)
	for {
		want := int64(len(buf))
		if length > 0 && left < want {
			want = left
		}
		n, err := fh.Read(buf[:want])
		left -= int64(n)
		last := err != nil || (length > 0 && left <= 0)
		typ := uint16(frameReadChunk)
		if last {
			typ = frameReadEnd
		}
		if werr := c.Write(ctx, websocket.MessageBinary, binFrame(rid, typ, seq, buf[:n])); werr != nil {
			return
		}
		seq++
		if last {
			return
		}
	}
}

func itoa(n uint16) string {
	b := []byte{}
	if n == 0 {
		return "0"
	}
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

func atou(s string) uint16 {
	var n uint16
	for _, ch := range s {
		if ch < '0' || ch > '9' {
			return 0
		}
		n = n*10 + uint16(ch-'0')
	}
	return n
}
