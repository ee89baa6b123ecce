//go:build unix

package journal

import (
	"errors"
	"syscall"
)

// hostSupported says the host strategy can open journals safely here.
const hostSupported = true

// fileKind is what a journal's path names on the host.
type fileKind int

const (
	fileMissing fileKind = iota
	fileRegular
	fileOther // a symbolic link, a FIFO, a directory, a device: never read
)

// hostFile is a journal read on the host. The agent runs as the same user
// and may replace the journal with anything: it is opened without
// following a symbolic link and without blocking (a FIFO), and read only
// when fstat says it is a regular file, in bounded chunks at explicit
// offsets (a huge sparse file costs reading, never memory). Like the poll
// strategy, it reads the file the path names now: a replaced journal is
// reopened and read on from the offset reached.
type hostFile struct {
	path     string
	fd       int // -1 when closed
	dev, ino uint64
}

func newHostFile(path string) *hostFile { return &hostFile{path: path, fd: -1} }

// look opens the file the path names now (keeping the descriptor while it
// names the same file) and returns its kind and size.
func (j *hostFile) look() (fileKind, int64, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(j.path, &st); err != nil {
		j.close()
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
			return fileMissing, 0, nil
		}
		return 0, 0, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		j.close()
		return fileOther, 0, nil
	}
	if j.fd >= 0 && uint64(st.Dev) == j.dev && uint64(st.Ino) == j.ino {
		return fileRegular, st.Size, nil
	}
	j.close()
	fd, err := syscall.Open(j.path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC|syscall.O_NOCTTY, 0)
	switch {
	case errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR):
		return fileMissing, 0, nil
	case errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENXIO):
		return fileOther, 0, nil // swapped for a link (or a socket) since the lstat
	case err != nil:
		return 0, 0, err
	}
	// The descriptor, not the path, decides: the path may have changed
	// between the lstat and the open.
	if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		_ = syscall.Close(fd)
		if err != nil {
			return 0, 0, err
		}
		return fileOther, 0, nil
	}
	j.fd, j.dev, j.ino = fd, uint64(st.Dev), uint64(st.Ino)
	return fileRegular, st.Size, nil
}

// readAt reads at most len(b) bytes at offset off of the open file.
func (j *hostFile) readAt(b []byte, off int64) (int, error) {
	if j.fd < 0 {
		return 0, nil
	}
	for {
		n, err := syscall.Pread(j.fd, b, off)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if n < 0 {
			n = 0
		}
		return n, err
	}
}

func (j *hostFile) close() {
	if j.fd >= 0 {
		_ = syscall.Close(j.fd)
		j.fd = -1
	}
}
