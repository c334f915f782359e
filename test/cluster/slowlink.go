package cluster

import (
	"net"
	"os"
	"sync"
	"time"
)

// SetDelay makes every byte that server from sends to server to arrive d
// late (0: on time), one direction only. The open connections between the
// two are closed, as a link that degrades resets them, and the new ones
// carry the delay. Heal does not undo it; SetDelay(from, to, 0) does.
func (n *Network) SetDelay(from, to string, d time.Duration) {
	n.mu.Lock()
	if n.delay == nil {
		n.delay = map[[2]string]time.Duration{}
	}
	if d > 0 {
		n.delay[[2]string{from, to}] = d
	} else {
		delete(n.delay, [2]string{from, to})
	}
	p := pair(from, to)
	var open []net.Conn
	for c := range n.conns[p] {
		open = append(open, c)
	}
	n.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}

// delays returns the delays of a connection that id dials to server to:
// of what it writes and of what it reads.
func (n *Network) delays(id, to string) (write, read time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.delay[[2]string{id, to}], n.delay[[2]string{to, id}]
}

// chunk is bytes due at a time.
type chunk struct {
	b   []byte
	due time.Time
}

// delayedConn delays what it writes by write and what it reads by read,
// in order, as a slow link does. Writes return at once; a failed delayed
// write closes the connection.
type delayedConn struct {
	net.Conn
	write, read time.Duration

	wq   chan chunk
	rq   chan chunk
	done chan struct{}
	once sync.Once

	rmu      sync.Mutex
	rest     []byte
	rerr     error
	deadline time.Time
}

func newDelayedConn(c net.Conn, write, read time.Duration) *delayedConn {
	d := &delayedConn{Conn: c, write: write, read: read, wq: make(chan chunk, 1024), rq: make(chan chunk, 1024), done: make(chan struct{})}
	if write > 0 {
		go d.writer()
	}
	if read > 0 {
		go d.reader()
	}
	return d
}

func (d *delayedConn) writer() {
	for {
		select {
		case <-d.done:
			return
		case ch := <-d.wq:
			if !d.wait(ch.due) {
				return
			}
			if _, err := d.Conn.Write(ch.b); err != nil {
				d.Close()
				return
			}
		}
	}
}

func (d *delayedConn) reader() {
	defer close(d.rq)
	for {
		buf := make([]byte, 32<<10)
		n, err := d.Conn.Read(buf)
		if n > 0 {
			select {
			case d.rq <- chunk{buf[:n], time.Now().Add(d.read)}:
			case <-d.done:
				return
			}
		}
		if err != nil {
			d.rmu.Lock()
			d.rerr = err
			d.rmu.Unlock()
			return
		}
	}
}

// wait sleeps until due; false if the connection closed first.
func (d *delayedConn) wait(due time.Time) bool {
	w := time.Until(due)
	if w <= 0 {
		return true
	}
	t := time.NewTimer(w)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-d.done:
		return false
	}
}

// Write queues b for later.
func (d *delayedConn) Write(b []byte) (int, error) {
	if d.write <= 0 {
		return d.Conn.Write(b)
	}
	select {
	case d.wq <- chunk{append([]byte(nil), b...), time.Now().Add(d.write)}:
		return len(b), nil
	case <-d.done:
		return 0, net.ErrClosed
	}
}

// Read returns bytes once their delay has passed, honouring the read
// deadline.
func (d *delayedConn) Read(b []byte) (int, error) {
	if d.read <= 0 {
		return d.Conn.Read(b)
	}
	d.rmu.Lock()
	if len(d.rest) > 0 {
		n := copy(b, d.rest)
		d.rest = d.rest[n:]
		d.rmu.Unlock()
		return n, nil
	}
	deadline := d.deadline
	d.rmu.Unlock()
	var expired <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expired = t.C
	}
	var ch chunk
	var ok bool
	select {
	case ch, ok = <-d.rq:
	case <-expired:
		return 0, os.ErrDeadlineExceeded
	case <-d.done:
		return 0, net.ErrClosed
	}
	if !ok {
		d.rmu.Lock()
		defer d.rmu.Unlock()
		return 0, d.rerr
	}
	if !d.wait(ch.due) {
		return 0, net.ErrClosed
	}
	n := copy(b, ch.b)
	d.rmu.Lock()
	d.rest = ch.b[n:]
	d.rmu.Unlock()
	return n, nil
}

// SetDeadline sets both deadlines.
func (d *delayedConn) SetDeadline(t time.Time) error {
	_ = d.SetReadDeadline(t)
	return d.Conn.SetWriteDeadline(t)
}

// SetReadDeadline bounds the next reads.
func (d *delayedConn) SetReadDeadline(t time.Time) error {
	if d.read <= 0 {
		return d.Conn.SetReadDeadline(t)
	}
	d.rmu.Lock()
	d.deadline = t
	d.rmu.Unlock()
	return nil
}

// Close closes the connection and drops what was not delivered.
func (d *delayedConn) Close() error {
	d.once.Do(func() { close(d.done) })
	return d.Conn.Close()
}
