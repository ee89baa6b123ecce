// Package guestproto is the wire protocol between provider/qemu and its
// guest agent (cmd/corral-guest) over one virtio-serial port.
//
// A frame is 4 magic bytes "\xC0RG\x01", a big-endian uint32 payload
// length (at most MaxPayload) and a JSON Msg. The port is a byte stream
// that the host may drop and reopen at any time (a corral process ends,
// another resumes the VM), so a reader that meets anything but the magic
// scans forward to the next one: the tail of a frame written before the
// reconnect is skipped, never misread.
//
// A session starts when the host sends Hello with a fresh random Session
// and the guest answers HelloOK with the same Session. Every later message
// carries its session; either side drops messages of another session. So
// output of a command started by an earlier host is never delivered to
// the next one (the command keeps running in the guest).
//
// Host to guest: Hello, Start (ID, Argv, Env, Dir, Stdin), Stdin (ID,
// Data), CloseStdin (ID), Kill (ID, PID, Signal, GraceMS).
// Guest to host: HelloOK, Started (ID, PID) or Error (ID, Err), Output
// (ID, FD 1 or 2, Data), Exit (ID, Code: 128+N for signal N) after the
// command's output ended, KillDone (ID, Err).
package guestproto

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Message types.
const (
	Hello      = "hello"
	HelloOK    = "hello-ok"
	Start      = "start"
	Started    = "started"
	Error      = "error"
	StdinData  = "stdin"
	CloseStdin = "close-stdin"
	Output     = "out"
	Exit       = "exit"
	Kill       = "kill"
	KillDone   = "kill-done"
)

// PortName is the virtio-serial port name the agent serves; further ports
// are PortName.1, PortName.2, … (one host connection each).
const PortName = "corral.agent"

// MaxPayload bounds one frame's JSON payload.
const MaxPayload = 1 << 20

// ChunkSize is the most output or stdin data one frame carries.
const ChunkSize = 256 << 10

var magic = [4]byte{0xC0, 'R', 'G', 0x01}

// Msg is one protocol message; which fields are set depends on T.
type Msg struct {
	T       string   `json:"t"`
	Session uint64   `json:"s,omitempty"`
	ID      uint64   `json:"id,omitempty"`
	Argv    []string `json:"argv,omitempty"`
	Env     []string `json:"env,omitempty"`
	Dir     string   `json:"dir,omitempty"`
	Stdin   bool     `json:"stdin,omitempty"`
	PID     int      `json:"pid,omitempty"`
	Signal  int      `json:"sig,omitempty"`
	GraceMS int64    `json:"graceMs,omitempty"`
	FD      int      `json:"fd,omitempty"`
	Data    []byte   `json:"data,omitempty"`
	Code    int      `json:"code,omitempty"`
	Err     string   `json:"err,omitempty"`
	// TimeUnixNano is the host's clock in Hello; the guest steps its clock
	// to it when they differ by more than a second (after a restore).
	TimeUnixNano int64 `json:"time,omitempty"`
	// Hostname in Hello is the sandbox's host name, which the guest sets
	// (a VM restored from another's snapshot wakes with that one's).
	Hostname string `json:"hostname,omitempty"`
	// Seed in Hello is fresh entropy the guest mixes into its random pool
	// and reseeds from, so restores of one snapshot do not share a random
	// stream.
	Seed []byte `json:"seed,omitempty"`
	// BootID and Uptime describe the guest in HelloOK.
	BootID string  `json:"boot,omitempty"`
	Uptime float64 `json:"uptime,omitempty"`
}

// Encode returns m as one frame.
func Encode(m *Msg) ([]byte, error) {
	p, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if len(p) > MaxPayload {
		return nil, fmt.Errorf("guestproto: message of %d bytes exceeds %d", len(p), MaxPayload)
	}
	b := make([]byte, 8+len(p))
	copy(b, magic[:])
	binary.BigEndian.PutUint32(b[4:], uint32(len(p)))
	copy(b[8:], p)
	return b, nil
}

// Reader reads frames from a byte stream, resynchronising on the magic.
type Reader struct {
	r *bufio.Reader
	// Skipped counts bytes dropped while resynchronising.
	Skipped int
}

// NewReader returns a Reader over r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 64<<10)} }

// Read returns the next well-formed message. It returns the underlying
// reader's error (io.EOF at the end); garbage, oversized or undecodable
// frames are skipped.
func (r *Reader) Read() (*Msg, error) {
	for {
		if err := r.sync(); err != nil {
			return nil, err
		}
		hdr, err := r.r.Peek(8)
		if err != nil {
			return nil, unexpected(err)
		}
		n := binary.BigEndian.Uint32(hdr[4:])
		if n > MaxPayload {
			r.drop(1)
			continue
		}
		if _, err := r.r.Discard(8); err != nil {
			return nil, unexpected(err)
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(r.r, p); err != nil {
			return nil, unexpected(err)
		}
		var m Msg
		if err := json.Unmarshal(p, &m); err != nil || m.T == "" {
			r.Skipped += 8 + int(n)
			continue
		}
		return &m, nil
	}
}

// sync discards bytes until the buffer starts with the magic.
func (r *Reader) sync() error {
	for {
		b, err := r.r.Peek(4)
		if err != nil {
			if len(b) > 0 && errors.Is(err, io.EOF) {
				r.Skipped += len(b)
				_, _ = r.r.Discard(len(b))
			}
			return err
		}
		if [4]byte(b) == magic {
			return nil
		}
		r.drop(1)
	}
}

func (r *Reader) drop(n int) {
	d, _ := r.r.Discard(n)
	r.Skipped += d
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
