package e2b

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/d10ffeed/corral/provider/cloudhttp"
	"github.com/d10ffeed/corral/sandbox"
)

// uploadSource copies the host directory src into the workspace root with
// one multipart POST to envd's /files (every file a "file" part named by
// its absolute path; envd makes the parents), then one command for what
// /files cannot say: empty directories and executable bits. A symbolic
// link is refused. The workspace is fresh, so no link inside it can
// redirect the writes.
func (h *handle) uploadSource(ctx context.Context, src string) error {
	op := Name + ".upload"
	type file struct{ host, rel string }
	var files []file
	var dirs, execs []string
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&os.ModeSymlink != 0:
			return fmt.Errorf("SourceDir holds a symbolic link (%s); the e2b provider uploads regular files only", rel)
		case d.IsDir():
			dirs = append(dirs, rel)
		case d.Type().IsRegular():
			files = append(files, file{p, rel})
			if fi, err := d.Info(); err == nil && fi.Mode()&0o111 != 0 {
				execs = append(execs, rel)
			}
		}
		return nil
	})
	if err != nil {
		return sandbox.Wrap(sandbox.InvalidArgument, op, h.id, err)
	}
	if len(files) > 0 {
		pr, pw := io.Pipe()
		mw := multipart.NewWriter(pw)
		go func() {
			for _, f := range files {
				w, err := mw.CreateFormFile("file", path.Join(h.root, f.rel))
				if err == nil {
					var fh *os.File
					if fh, err = os.Open(f.host); err == nil {
						_, err = io.Copy(w, fh)
						fh.Close()
					}
				}
				if err != nil {
					pw.CloseWithError(err)
					return
				}
			}
			pw.CloseWithError(mw.Close())
		}()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(h.envdBase, "/")+"/files", pr)
		if err != nil {
			pr.Close()
			return sandbox.Wrap(sandbox.Internal, op, h.id, err)
		}
		req.Header.Set("Content-Type", mw.FormDataContentType())
		resp, err := h.envdHTTP.Do(req)
		pr.Close()
		if err != nil {
			return sandbox.Errorf(sandbox.Unavailable, op, h.id, "E2B envd: POST /files: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode >= 400 {
			var eb ErrorBody
			msg := strings.TrimSpace(string(body))
			if json.Unmarshal(body, &eb) == nil && eb.Message != "" {
				msg = eb.Message
			}
			return sandbox.Errorf(cloudhttp.CodeForStatus(resp.StatusCode), op, h.id, "E2B envd answered %d to POST /files: %s", resp.StatusCode, msg)
		}
	}
	if len(dirs) == 0 && len(execs) == 0 {
		return nil
	}
	// One command: make every directory (empty ones included) and set
	// the executable bits, paths as positional parameters.
	script := `root=$1; n=$2; shift 2; cd "$root" || exit 1
i=0; for p; do if [ $i -lt "$n" ]; then mkdir -p -- "$p" || exit 1; else chmod +x -- "$p" || exit 1; fi; i=$((i+1)); done`
	argv := append([]string{"sh", "-c", script, "sh", h.root, fmt.Sprint(len(dirs))}, append(dirs, execs...)...)
	res, err := h.run.Run(ctx, op, argv, nil, "")
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return sandbox.Errorf(sandbox.Internal, op, h.id, "making directories and executable bits: exit %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}
