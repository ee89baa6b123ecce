//go:build unix

package journal

import (
	"errors"

	"golang.org/x/sys/unix"
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
	var st unix.Stat_t
	if err := unix.Lstat(j.path, &st); err != nil {
		j.close()
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			return fileMissing, 0, nil
		}
		return 0, 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		j.close()
		return fileOther, 0, nil
	}
	if j.fd >= 0 && uint64(st.Dev) == j.dev && uint64(st.Ino) == j.ino {
		return fileRegular, st.Size, nil
	}
	j.close()
	fd, err := unix.Open(j.path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	switch {
	case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
		return fileMissing, 0, nil
	case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENXIO):
		return fileOther, 0, nil // swapped for a link (or a socket) since the lstat
	case err != nil:
		return 0, 0, err
	}
	// The descriptor, not the path, decides: the path may have changed
	// between the lstat and the open.
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		_ = unix.Close(fd)
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
		n, err := unix.Pread(j.fd, b, off)
		if errors.Is(err, unix.EINTR) {
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
		_ = unix.Close(j.fd)
		j.fd = -1
	}
}
