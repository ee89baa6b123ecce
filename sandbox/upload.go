package sandbox

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// UploadDir copies the host directory src into fsys's workspace root
// through fsys (MkdirAll and WriteFile, so every path passes its rules),
// for a provider whose backend has no bulk upload of its own. A symbolic
// link is refused (naming provider), never followed.
func UploadDir(ctx context.Context, fsys FS, src, provider string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			return fsys.MkdirAll(ctx, rel)
		case d.Type()&os.ModeSymlink != 0:
			return fmt.Errorf("SourceDir holds a symbolic link (%s); the %s provider uploads regular files only", rel, provider)
		case d.Type().IsRegular():
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return fsys.WriteFile(ctx, rel, data)
		}
		return nil
	})
}
