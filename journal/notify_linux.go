//go:build linux

package journal

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"unsafe"
)

// notifier is the process's one inotify instance (instances are few per
// user: 128 by default): it watches each journal directory once and wakes
// the readers of the files named in its events. A wake only says "look
// again"; readers never trust an event's content.
var notifier struct {
	once sync.Once
	f    *os.File
	mu   sync.Mutex
	dirs map[string]*watchedDir // by directory
	wds  map[int32]*watchedDir  // by watch descriptor
}

type watchedDir struct {
	dir  string
	wd   int32
	subs map[string]map[chan struct{}]struct{} // file name -> wake channels
}

func notifyInit() {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return
	}
	notifier.f = os.NewFile(uintptr(fd), "inotify") // non-blocking: read through the runtime poller
	notifier.dirs = map[string]*watchedDir{}
	notifier.wds = map[int32]*watchedDir{}
	go notifyLoop(notifier.f)
}

const notifyMask = syscall.IN_MODIFY | syscall.IN_CREATE | syscall.IN_DELETE | syscall.IN_MOVED_TO | syscall.IN_MOVED_FROM | syscall.IN_ATTRIB | syscall.IN_CLOSE_WRITE | syscall.IN_ONLYDIR

// watchFile returns a channel that receives (coalesced) a value when the
// file at path may have changed, and the function that stops the watch.
// ok is false when no watch could be set (no inotify, no directory): the
// caller then relies on its tick alone.
func watchFile(path string) (<-chan struct{}, func(), bool) {
	notifier.once.Do(notifyInit)
	if notifier.f == nil {
		return nil, func() {}, false
	}
	dir, name := filepath.Dir(path), filepath.Base(path)
	notifier.mu.Lock()
	defer notifier.mu.Unlock()
	d := notifier.dirs[dir]
	if d == nil {
		wd, err := syscall.InotifyAddWatch(int(notifier.f.Fd()), dir, notifyMask)
		if err != nil {
			return nil, func() {}, false
		}
		if d = notifier.wds[int32(wd)]; d == nil { // the same directory under another name
			d = &watchedDir{dir: dir, wd: int32(wd), subs: map[string]map[chan struct{}]struct{}{}}
			notifier.wds[d.wd] = d
		}
		notifier.dirs[dir] = d
	}
	ch := make(chan struct{}, 1)
	if d.subs[name] == nil {
		d.subs[name] = map[chan struct{}]struct{}{}
	}
	d.subs[name][ch] = struct{}{}
	return ch, func() {
		notifier.mu.Lock()
		defer notifier.mu.Unlock()
		delete(d.subs[name], ch)
		if len(d.subs[name]) == 0 {
			delete(d.subs, name)
		}
	}, true
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func notifyLoop(f *os.File) {
	buf := make([]byte, 64<<10)
	for {
		n, err := f.Read(buf)
		if err != nil {
			return
		}
		notifier.mu.Lock()
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameLen := int(ev.Len)
			end := off + syscall.SizeofInotifyEvent + nameLen
			if end > n {
				break
			}
			name := string(trimNUL(buf[off+syscall.SizeofInotifyEvent : end]))
			off = end
			if ev.Mask&syscall.IN_Q_OVERFLOW != 0 {
				for _, d := range notifier.wds {
					for _, subs := range d.subs {
						for ch := range subs {
							wake(ch)
						}
					}
				}
				continue
			}
			d := notifier.wds[ev.Wd]
			if d == nil {
				continue
			}
			if ev.Mask&syscall.IN_IGNORED != 0 {
				// The directory went away: its readers fall back to
				// their tick; a new watch is set on the next watchFile.
				delete(notifier.wds, ev.Wd)
				for dir, x := range notifier.dirs {
					if x == d {
						delete(notifier.dirs, dir)
					}
				}
				for _, subs := range d.subs {
					for ch := range subs {
						wake(ch)
					}
				}
				continue
			}
			for ch := range d.subs[name] {
				wake(ch)
			}
		}
		notifier.mu.Unlock()
	}
}

func trimNUL(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}
