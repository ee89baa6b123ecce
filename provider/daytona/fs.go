package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
)

// fsys is the exec-backed file system with ReadFile and WriteFile straight
// through Daytona's files/bulk-download and files/bulk-upload, one request
// each (a session command's log marks its streams with 3-byte markers, so
// binary content holding 01 01 01 or 02 02 02 would be cut by a `cat`; the
// download is byte-exact). The path rules (sandbox.CleanPath,
// sandbox.MapPath) are checked here. The daemon follows symbolic links, so
// the link guard is the exec-backed one (Stat before a read, execfs's
// WriteFile for a write), taken only while a link could stand in the
// workspace (handle.links): once the handle started a command, or when it
// resumed a sandbox or restored a snapshot.
type fsys struct {
	sandbox.FS
	h *handle
}

// ReadFile reads a regular file through the download endpoint.
func (f fsys) ReadFile(ctx context.Context, name string) ([]byte, error) {
	if _, err := sandbox.CleanPath(name); err != nil {
		return nil, err
	}
	abs, err := sandbox.MapPath(f.h.root, name)
	if err != nil {
		return nil, err
	}
	if f.h.links.Load() {
		fi, err := f.FS.Stat(ctx, name)
		if err != nil || fi.Type != sandbox.TypeFile {
			return f.FS.ReadFile(ctx, name)
		}
	}
	return f.h.download(ctx, abs, name)
}

// WriteFile writes through the upload endpoint, which makes missing parent
// directories (0755) as execfs's WriteFile does, and truncates a file it
// replaces in place, keeping its mode.
func (f fsys) WriteFile(ctx context.Context, name string, data []byte) error {
	rel, err := sandbox.CleanPath(name)
	if err != nil {
		return err
	}
	abs, err := sandbox.MapPath(f.h.root, name)
	if err != nil {
		return err
	}
	if rel == "." {
		return sandbox.Errorf(sandbox.InvalidArgument, "fs.write", name, "cannot write the workspace root")
	}
	if f.h.links.Load() {
		return f.FS.WriteFile(ctx, name, data)
	}
	err = f.h.upload(ctx, Name+".fs", map[string][]byte{abs: data})
	if err == nil {
		return nil
	}
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, "is a directory"):
		return sandbox.Errorf(sandbox.FailedPrecondition, "fs.write", name, "is a directory")
	case strings.Contains(msg, "not a directory"):
		return sandbox.Errorf(sandbox.FailedPrecondition, "fs.write", name, "not a directory")
	case strings.Contains(msg, "permission denied"):
		return sandbox.Errorf(sandbox.PermissionDenied, "fs.write", name, "permission denied")
	}
	return err
}

// download reads one file with POST /files/bulk-download; a missing file
// is NotFound and a directory FailedPrecondition, from the answer's error
// part.
func (h *handle) download(ctx context.Context, abs, name string) ([]byte, error) {
	op := Name + ".fs"
	resp, err := h.tb.Do(ctx, cloudhttp.Request{Op: op, ID: h.sb.ID, Method: http.MethodPost, Path: "/files/bulk-download",
		JSON: map[string][]string{"paths": {abs}}, Idempotent: true}, nil)
	if err != nil {
		return nil, err
	}
	_, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		return nil, sandbox.Errorf(sandbox.Internal, op, h.sb.ID, "daytona's download answer is not multipart (%v)", err)
	}
	mr := multipart.NewReader(bytes.NewReader(resp.Body), params["boundary"])
	for {
		part, err := mr.NextPart()
		if err != nil {
			return nil, sandbox.Errorf(sandbox.Internal, op, h.sb.ID, "daytona's download answer has no part for %s (%v)", abs, err)
		}
		data, rerr := io.ReadAll(part)
		if rerr != nil {
			return nil, sandbox.Errorf(sandbox.Unavailable, op, h.sb.ID, "reading %s: %v", abs, rerr)
		}
		switch part.FormName() {
		case "file":
			return data, nil
		case "error":
			var e struct {
				Message    string `json:"message"`
				StatusCode int    `json:"statusCode"`
				Code       string `json:"code"`
			}
			_ = json.Unmarshal(data, &e)
			lower := strings.ToLower(e.Message)
			switch {
			case e.StatusCode == http.StatusNotFound || strings.Contains(lower, "no such file"):
				return nil, sandbox.Errorf(sandbox.NotFound, "fs.read", name, "no such file or directory")
			case strings.Contains(lower, "is a directory"):
				return nil, sandbox.Errorf(sandbox.FailedPrecondition, "fs.read", name, "is a directory")
			case strings.Contains(lower, "not a directory"):
				return nil, sandbox.Errorf(sandbox.FailedPrecondition, "fs.read", name, "not a directory")
			}
			return nil, sandbox.Errorf(cloudhttp.CodeForStatus(e.StatusCode), op, abs, "daytona could not read the file: %s", e.Message)
		}
	}
}
