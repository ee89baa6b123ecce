package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
)

// fsys is the exec-backed file system with ReadFile through Daytona's
// files/bulk-download: a session command's log marks its streams with
// 3-byte markers, so binary content holding 01 01 01 or 02 02 02 would
// be cut by a `cat`; the download is byte-exact. The path rules (the link
// guard, NotFound, a directory) are checked by the exec-backed Stat first.
type fsys struct {
	sandbox.FS
	h *handle
}

// ReadFile reads a regular file through the download endpoint.
func (f fsys) ReadFile(ctx context.Context, name string) ([]byte, error) {
	fi, err := f.FS.Stat(ctx, name)
	if err != nil || fi.Type != sandbox.TypeFile {
		return f.FS.ReadFile(ctx, name)
	}
	abs, err := sandbox.MapPath(f.h.root, name)
	if err != nil {
		return nil, err
	}
	return f.h.download(ctx, abs)
}

// download reads one file with POST /files/bulk-download.
func (h *handle) download(ctx context.Context, abs string) ([]byte, error) {
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
			}
			_ = json.Unmarshal(data, &e)
			return nil, sandbox.Errorf(cloudhttp.CodeForStatus(e.StatusCode), op, abs, "daytona could not read the file: %s", e.Message)
		}
	}
}
