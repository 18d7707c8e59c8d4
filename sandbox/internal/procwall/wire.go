//go:build linux

package procwall

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"golang.org/x/sys/unix"
)

// The wire. Every message travels on a SOCK_SEQPACKET socket, so message
// boundaries are the kernel's: a message is one packet of at most
// maxPacket bytes whose first byte is its op (every op is below 0x80), or,
// when longer, a first packet of longMark and the total length (a u32)
// followed by the message and continuation packets. Numbers are little-endian. Everything the worker sends is
// untrusted: the decoder bounds-checks every length against what is left
// of the message, and the host caps a message at maxMessage bytes.

// protocolVersion is the wire's version; the worker states it in its hello
// and the host refuses any other.
const protocolVersion = 4

const (
	maxPacket  = 60 << 10
	maxMessage = 64 << 20
	longMark   = 0xff
)

// Message operations.
const (
	// control socket, host -> worker
	opCompile  byte = 1 // json compileRequest, memfd of the module bytes
	opInstance byte = 2 // u64 id, i64 deadline; the instance socket's fd
	opCancel   byte = 3 // u64 id: cancel that instance's call in progress
	// control socket, worker -> host
	opHello    byte = 10 // u32 version, json Report
	opCompiled byte = 11 // error
	// instance socket, host -> worker
	opExport byte = 20 // name, params, results
	opCall   byte = 21 // u32 function, i64 deadline, i64 caller deadline, stack
	opClose  byte = 22
	opBell   byte = 23 // the doorbell's memfd (bell.go): later requests come through it
	// instance socket, worker -> host
	opInstantiated byte = 30 // error, then the memory: fd, reserved, length
	opExported     byte = 31 // error, u32 function
	opReturned     byte = 32 // error, stack, memory length, guest state, logs
	opBellReady    byte = 33 // error: the worker mapped the doorbell (or not: the socket stays)
)

// enc builds one message.
type enc struct{ b []byte }

func (e *enc) reset(op byte)  { e.b = append(e.b[:0], op) }
func (e *enc) u8(v byte)      { e.b = append(e.b, v) }
func (e *enc) u32(v uint32)   { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *enc) u64(v uint64)   { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *enc) i64(v int64)    { e.u64(uint64(v)) }
func (e *enc) bytes(b []byte) { e.u32(uint32(len(b))); e.b = append(e.b, b...) }
func (e *enc) str(s string)   { e.u32(uint32(len(s))); e.b = append(e.b, s...) }
func (e *enc) bool(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

// dec reads one message. The first failure sticks: every later read
// returns zero values, and err says at which byte offset it failed.
type dec struct {
	b   []byte
	off int
	err error
}

func (d *dec) need(n uint64, what string) bool {
	if d.err != nil {
		return false
	}
	if n > uint64(len(d.b)-d.off) {
		d.err = fmt.Errorf("message truncated at byte offset %d: %s needs %d bytes, %d left", d.off, what, n, len(d.b)-d.off)
		return false
	}
	return true
}

func (d *dec) u8() byte {
	if !d.need(1, "a byte") {
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

func (d *dec) u32() uint32 {
	if !d.need(4, "a u32") {
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b[d.off:])
	d.off += 4
	return v
}

func (d *dec) u64() uint64 {
	if !d.need(8, "a u64") {
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v
}

func (d *dec) i64() int64 { return int64(d.u64()) }
func (d *dec) bool() bool { return d.u8() != 0 }

func (d *dec) bytes() []byte {
	n := d.u32()
	if !d.need(uint64(n), "a byte string") {
		return nil
	}
	v := d.b[d.off : d.off+int(n) : d.off+int(n)]
	d.off += int(n)
	return v
}

func (d *dec) str() string { return string(d.bytes()) }

// count reads a count of items each at least min bytes long, refusing one
// the rest of the message cannot hold.
func (d *dec) count(min uint64, what string) int {
	n := d.u32()
	if d.err == nil && uint64(n)*min > uint64(len(d.b)-d.off) {
		d.err = fmt.Errorf("message at byte offset %d claims %d %s, more than its %d remaining bytes hold", d.off, n, what, len(d.b)-d.off)
		return 0
	}
	return int(n)
}

// errPeerGone is a socket's end: the other process closed it or died.
var errPeerGone = errors.New("the other end of the socket closed")

// send writes one message, passing fd (when >= 0) with its first packet.
func send(sock int, msg []byte, fd int) error {
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	if len(msg) <= maxPacket && len(msg) > 0 && msg[0]&0x80 == 0 {
		return sendPacket(sock, msg, oob)
	}
	head := binary.LittleEndian.AppendUint32(append(make([]byte, 0, maxPacket), longMark), uint32(len(msg)))
	take := min(len(msg), maxPacket-5)
	if err := sendPacket(sock, append(head, msg[:take]...), oob); err != nil {
		return err
	}
	for rest := msg[take:]; len(rest) > 0; {
		n := min(len(rest), maxPacket)
		if err := sendPacket(sock, rest[:n], nil); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return nil
}

// sendPacket sends one packet with MSG_NOSIGNAL: a peer that is gone is
// EPIPE, never a SIGPIPE, which in a foreign process that loaded the
// library (Python, a C program) could end the whole process.
func sendPacket(sock int, p, oob []byte) error {
	for {
		_, err := unix.SendmsgN(sock, p, oob, nil, unix.MSG_NOSIGNAL)
		switch {
		case err == unix.EINTR || err == unix.EAGAIN:
			continue
		case err == unix.EPIPE || err == unix.ECONNRESET:
			return errPeerGone
		}
		return err
	}
}

// recv reads one message into buf (grown as needed) and returns it with
// the descriptor that came with it (-1 for none; withFD false reads with
// read(2), which is cheaper, and takes none: a descriptor the peer sends
// anyway is discarded by the kernel). A message of more than limit bytes
// is refused.
func recv(sock int, buf []byte, limit int, withFD bool) ([]byte, int, error) {
	if cap(buf) < maxPacket {
		buf = make([]byte, maxPacket)
	}
	buf = buf[:cap(buf)]
	var oob []byte
	if withFD {
		oob = make([]byte, unix.CmsgSpace(4))
	}
	n, fd, err := recvPacket(sock, buf[:maxPacket], oob)
	if err != nil {
		return nil, -1, err
	}
	if buf[0] != longMark {
		return buf[:n], fd, nil // a short message: its first byte is its op
	}
	if n < 5 {
		closeFD(fd)
		return nil, -1, errors.New("a long message's first packet is shorter than its header")
	}
	total := int(binary.LittleEndian.Uint32(buf[1:]))
	if total > limit {
		closeFD(fd)
		return nil, -1, fmt.Errorf("a message of %d bytes, above the limit of %d", total, limit)
	}
	msg := make([]byte, 0, total)
	if n-5 > total {
		closeFD(fd)
		return nil, -1, fmt.Errorf("a message longer than the %d bytes it declared", total)
	}
	msg = append(msg, buf[5:n]...)
	for len(msg) < total {
		k, extra, err := recvPacket(sock, buf[:maxPacket], nil)
		closeFD(extra)
		if err != nil {
			closeFD(fd)
			return nil, -1, err
		}
		if len(msg)+k > total {
			closeFD(fd)
			return nil, -1, fmt.Errorf("a message longer than the %d bytes it declared", total)
		}
		msg = append(msg, buf[:k]...)
	}
	return msg, fd, nil
}

// recvPacket reads one packet; fd is the descriptor passed with it, if any.
func recvPacket(sock int, p, oob []byte) (n, fd int, err error) {
	fd = -1
	for {
		var oobn, flags int
		if oob == nil {
			n, err = unix.Read(sock, p)
		} else {
			n, oobn, flags, _, err = unix.Recvmsg(sock, p, oob, unix.MSG_CMSG_CLOEXEC)
		}
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err == unix.ECONNRESET {
			return 0, -1, errPeerGone
		}
		if err != nil {
			return 0, -1, err
		}
		if oobn > 0 {
			fd = parseRights(oob[:oobn])
		}
		if flags&unix.MSG_TRUNC != 0 {
			closeFD(fd)
			return 0, -1, errors.New("a packet longer than the protocol allows")
		}
		if n == 0 {
			closeFD(fd)
			return 0, -1, errPeerGone
		}
		return n, fd, nil
	}
}

// parseRights returns the first descriptor of a control message and closes
// any others: a peer that sends more than it should leaks nothing.
func parseRights(oob []byte) int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return -1
	}
	fd := -1
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, f := range fds {
			if fd < 0 {
				fd = f
			} else {
				closeFD(f)
			}
		}
	}
	return fd
}

func closeFD(fd int) {
	if fd >= 0 {
		_ = unix.Close(fd)
	}
}

// deadlineNanos encodes a deadline as the nanoseconds left until it (at
// least 1, so one already past still reads as set), or -1 for none.
func deadlineNanos(left int64, set bool) int64 {
	if !set {
		return -1
	}
	return max(left, 1)
}

// clampNanos keeps a decoded duration in a range time arithmetic survives.
func clampNanos(v int64) int64 { return min(v, math.MaxInt64/4) }
