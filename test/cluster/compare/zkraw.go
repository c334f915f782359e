package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// A minimal ZooKeeper-protocol session, for the scale figures that need
// more sessions or watches than go-zookeeper can hold in one process: it
// costs a goroutine and a few hundred bytes where go-zookeeper's costs
// three goroutines and 3 MB of buffers, and it registers watches without a
// channel each. It speaks only what those figures use: connect, ping,
// getData with a watch, addWatch (persistent recursive), and it discards
// notifications, counting them. Both ZooKeeper and coordd answer it alike.

// The request types and special xids it uses (ZooDefs.OpCode).
const (
	opGetData  = 4
	opPing     = 11
	opAddWatch = 106
	xidNotify  = -1
	xidPing    = -2
	// addWatchRecursive is AddWatchMode.PERSISTENT_RECURSIVE.
	addWatchRecursive = 1
)

// rawSession is one session on one connection.
type rawSession struct {
	conn    net.Conn
	id      int64
	timeout time.Duration

	wmu  sync.Mutex // serialises writes
	bw   *bufio.Writer
	xid  int32
	sent atomic.Int64 // requests sent (pings excluded)
	done atomic.Int64 // their replies received
	errs atomic.Int64 // replies with an error code
	// notified counts watch notifications; pongs, ping replies.
	notified, pongs atomic.Int64
	lastPong        atomic.Int64 // unix nanoseconds of the last ping reply
	closed          chan struct{}
	err             error // why the connection ended, once closed is closed
}

// dialRaw opens a session on server with the given timeout, from local
// address from (nil: any).
func dialRaw(server string, from net.Addr, timeout time.Duration) (*rawSession, error) {
	d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: from}
	conn, err := d.Dial("tcp", server)
	if err != nil {
		return nil, err
	}
	// ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId,
	// passwd (16 zero bytes), as go-zookeeper sends it.
	req := make([]byte, 4, 48)
	req = binary.BigEndian.AppendUint32(req, 0)
	req = binary.BigEndian.AppendUint64(req, 0)
	req = binary.BigEndian.AppendUint32(req, uint32(timeout.Milliseconds()))
	req = binary.BigEndian.AppendUint64(req, 0)
	req = binary.BigEndian.AppendUint32(req, 16)
	req = append(req, make([]byte, 16)...)
	binary.BigEndian.PutUint32(req, uint32(len(req)-4))
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write(req); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReaderSize(conn, 512)
	resp, err := readFrame(br, nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("connect to %s: %w", server, err)
	}
	// ConnectResponse: protocolVersion, timeOut, sessionId, passwd.
	if len(resp) < 16 {
		conn.Close()
		return nil, fmt.Errorf("connect to %s: short answer", server)
	}
	s := &rawSession{
		conn:    conn,
		timeout: time.Duration(binary.BigEndian.Uint32(resp[4:])) * time.Millisecond,
		id:      int64(binary.BigEndian.Uint64(resp[8:])),
		bw:      bufio.NewWriterSize(conn, 256),
		closed:  make(chan struct{}),
	}
	if s.id == 0 || s.timeout <= 0 {
		conn.Close()
		return nil, fmt.Errorf("connect to %s: session refused", server)
	}
	_ = conn.SetDeadline(time.Time{})
	s.lastPong.Store(time.Now().UnixNano())
	go s.readLoop(br)
	return s, nil
}

// readFrame reads one length-prefixed frame, into buf when it fits.
func readFrame(r io.Reader, buf []byte) ([]byte, error) {
	var l [4]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(l[:])
	if n > 64<<20 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	if int(n) > cap(buf) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err := io.ReadFull(r, buf)
	return buf, err
}

func (s *rawSession) readLoop(br *bufio.Reader) {
	var buf []byte
	var err error
	for {
		if buf, err = readFrame(br, buf[:0]); err != nil {
			break
		}
		if len(buf) < 16 {
			err = errors.New("short reply")
			break
		}
		xid := int32(binary.BigEndian.Uint32(buf))
		code := int32(binary.BigEndian.Uint32(buf[12:]))
		switch xid {
		case xidNotify:
			s.notified.Add(1)
		case xidPing:
			s.pongs.Add(1)
			s.lastPong.Store(time.Now().UnixNano())
		default:
			if code != 0 {
				s.errs.Add(1)
			}
			s.done.Add(1)
		}
	}
	s.err = err
	close(s.closed)
}

// send writes one request: header (xid, type) and body; flush sends it at
// once rather than with the next.
func (s *rawSession) send(op int32, body []byte, flush bool) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	xid := int32(xidPing)
	if op != opPing {
		s.xid++
		xid = s.xid
		s.sent.Add(1)
	}
	var hdr [12]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(8+len(body)))
	binary.BigEndian.PutUint32(hdr[4:], uint32(xid))
	binary.BigEndian.PutUint32(hdr[8:], uint32(op))
	s.bw.Write(hdr[:])
	s.bw.Write(body)
	if flush {
		return s.bw.Flush()
	}
	return nil
}

func (s *rawSession) flush() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.bw.Flush()
}

// ping sends a ping.
func (s *rawSession) ping() error { return s.send(opPing, nil, true) }

// appendPath appends a jute ustring.
func appendPath(b []byte, path string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(path)))
	return append(b, path...)
}

// getDataWatch queues getData(path, watch), unflushed.
func (s *rawSession) getDataWatch(path string) error {
	return s.send(opGetData, append(appendPath(nil, path), 1), false)
}

// addRecursiveWatch queues addWatch(path, PERSISTENT_RECURSIVE), unflushed.
func (s *rawSession) addRecursiveWatch(path string) error {
	return s.send(opAddWatch, binary.BigEndian.AppendUint32(appendPath(nil, path), addWatchRecursive), false)
}

// waitReplies flushes and waits until every request sent has its reply,
// for at most d.
func (s *rawSession) waitReplies(d time.Duration) error {
	if err := s.flush(); err != nil {
		return err
	}
	deadline := time.Now().Add(d)
	for s.done.Load() < s.sent.Load() {
		select {
		case <-s.closed:
			return fmt.Errorf("connection closed: %v", s.err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d replies after %v", s.done.Load(), s.sent.Load(), d)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := s.errs.Load(); n > 0 {
		return fmt.Errorf("%d requests failed", n)
	}
	return nil
}

// alive reports whether the connection is open and a ping was answered
// within the session timeout.
func (s *rawSession) alive() bool {
	select {
	case <-s.closed:
		return false
	default:
	}
	return time.Since(time.Unix(0, s.lastPong.Load())) < s.timeout
}

// close closes the connection without closing the session (the server
// expires it); closeSession ends it properly first.
func (s *rawSession) close() { s.conn.Close() }

// closeSession sends closeSession (op -11) and closes the connection.
func (s *rawSession) closeSession() {
	_ = s.send(-11, nil, true)
	select {
	case <-s.closed:
	case <-time.After(2 * time.Second):
	}
	s.conn.Close()
}
