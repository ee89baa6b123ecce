package e2bfake

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"sort"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/d10ffeed/corral/internal/fakecloud"
	"github.com/d10ffeed/corral/provider/e2b"
	fspb "github.com/d10ffeed/corral/provider/e2b/internal/envd/filesystem"
	"github.com/d10ffeed/corral/provider/e2b/internal/envd/filesystem/filesystemconnect"
)

// readFile is envd's GET /files?path=…&username=…: the file's bytes;
// 404 when missing, 400 for a directory.
func (f *Fake) readFile(w http.ResponseWriter, r *http.Request) {
	sb := ctxSandbox(r.Context())
	p := resolve(sb, r.URL.Query().Get("path"))
	fi, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		writeError(w, http.StatusNotFound, "path '%s' does not exist", p)
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, "error statting path: %v", err)
		return
	case fi.IsDir():
		writeError(w, http.StatusBadRequest, "path '%s' is a directory", p)
		return
	}
	fh, err := os.Open(p)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "error opening file: %v", err)
		return
	}
	defer fh.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(fi.Size()))
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, fh)
}

// writeFile is envd's POST /files?path=…: a multipart body (one "file"
// part per file, the part's file name the path when the query has none)
// or an application/octet-stream body. Parents are made; the answer lists
// the written entries.
func (f *Fake) writeFile(w http.ResponseWriter, r *http.Request) {
	sb := ctxSandbox(r.Context())
	qpath := r.URL.Query().Get("path")
	var out []e2b.EntryInfo
	put := func(name string, body io.Reader) error {
		p := resolve(sb, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		fh, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		if _, err := io.Copy(fh, body); err != nil {
			fh.Close()
			return err
		}
		if err := fh.Close(); err != nil {
			return err
		}
		out = append(out, e2b.EntryInfo{Path: p, Name: filepath.Base(p), Type: "file"})
		return nil
	}
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/octet-stream":
		if qpath == "" {
			writeError(w, http.StatusBadRequest, "path is required for an octet-stream upload")
			return
		}
		if err := put(qpath, r.Body); err != nil {
			writeError(w, http.StatusInternalServerError, "error writing file: %v", err)
			return
		}
	case "multipart/form-data":
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				writeError(w, http.StatusBadRequest, "error parsing multipart body: %v", err)
				return
			}
			if part.FormName() != "file" {
				continue
			}
			name := qpath
			if name == "" {
				// The whole file name: Part.FileName keeps only its base.
				_, cd, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
				name = cd["filename"]
			}
			if err := put(name, part); err != nil {
				writeError(w, http.StatusInternalServerError, "error writing file: %v", err)
				return
			}
		}
	default:
		writeError(w, http.StatusBadRequest, "unsupported content type %q", ct)
		return
	}
	fakecloud.WriteJSON(w, http.StatusOK, out)
}

type fsService struct {
	filesystemconnect.UnimplementedFilesystemHandler
	f *Fake
}

func entry(p string) (*fspb.EntryInfo, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	e := &fspb.EntryInfo{Name: filepath.Base(p), Path: p, Size: fi.Size(), Mode: uint32(fi.Mode().Perm()),
		Permissions: fi.Mode().String(), Owner: "user", Group: "user", ModifiedTime: timestamppb.New(fi.ModTime())}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = fspb.FileType_FILE_TYPE_SYMLINK
		if t, err := os.Readlink(p); err == nil {
			e.SymlinkTarget = &t
		}
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			e.Type = fspb.FileType_FILE_TYPE_DIRECTORY
		}
	case fi.IsDir():
		e.Type = fspb.FileType_FILE_TYPE_DIRECTORY
	default:
		e.Type = fspb.FileType_FILE_TYPE_FILE
	}
	return e, nil
}

func fsError(err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, fs.ErrExist):
		return connect.NewError(connect.CodeAlreadyExists, err)
	case errors.Is(err, fs.ErrPermission):
		return connect.NewError(connect.CodePermissionDenied, err)
	}
	return connect.NewError(connect.CodeInternal, err)
}

// Stat describes a path.
func (s *fsService) Stat(ctx context.Context, req *connect.Request[fspb.StatRequest]) (*connect.Response[fspb.StatResponse], error) {
	e, err := entry(resolve(ctxSandbox(ctx), req.Msg.Path))
	if err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&fspb.StatResponse{Entry: e}), nil
}

// MakeDir makes a directory and its parents; one that exists is
// AlreadyExists.
func (s *fsService) MakeDir(ctx context.Context, req *connect.Request[fspb.MakeDirRequest]) (*connect.Response[fspb.MakeDirResponse], error) {
	p := resolve(ctxSandbox(ctx), req.Msg.Path)
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory at %s already exists", p))
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		return nil, fsError(err)
	}
	e, err := entry(p)
	if err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&fspb.MakeDirResponse{Entry: e}), nil
}

// Move renames a path.
func (s *fsService) Move(ctx context.Context, req *connect.Request[fspb.MoveRequest]) (*connect.Response[fspb.MoveResponse], error) {
	sb := ctxSandbox(ctx)
	src, dst := resolve(sb, req.Msg.Source), resolve(sb, req.Msg.Destination)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return nil, fsError(err)
	}
	if err := os.Rename(src, dst); err != nil {
		return nil, fsError(err)
	}
	e, err := entry(dst)
	if err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&fspb.MoveResponse{Entry: e}), nil
}

// ListDir lists a directory to the depth asked (default 1).
func (s *fsService) ListDir(ctx context.Context, req *connect.Request[fspb.ListDirRequest]) (*connect.Response[fspb.ListDirResponse], error) {
	root := resolve(ctxSandbox(ctx), req.Msg.Path)
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fsError(err)
	}
	if !fi.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %s is not a directory", root))
	}
	depth := int(req.Msg.Depth)
	if depth <= 0 {
		depth = 1
	}
	var out []*fspb.EntryInfo
	var walk func(dir string, d int) error
	walk = func(dir string, d int) error {
		des, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		sort.Slice(des, func(i, j int) bool { return des[i].Name() < des[j].Name() })
		for _, de := range des {
			p := filepath.Join(dir, de.Name())
			e, err := entry(p)
			if err != nil {
				continue
			}
			out = append(out, e)
			if de.IsDir() && d < depth {
				if err := walk(p, d+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root, 1); err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&fspb.ListDirResponse{Entries: out}), nil
}

// Remove removes a path and what is under it.
func (s *fsService) Remove(ctx context.Context, req *connect.Request[fspb.RemoveRequest]) (*connect.Response[fspb.RemoveResponse], error) {
	if err := os.RemoveAll(resolve(ctxSandbox(ctx), req.Msg.Path)); err != nil {
		return nil, fsError(err)
	}
	return connect.NewResponse(&fspb.RemoveResponse{}), nil
}
