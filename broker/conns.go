package broker

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/mochi-mqtt/server/v2/listeners"
)

// refusedClosing: a connection accepted while the broker closes.
const refusedClosing = "closing"

// conns tracks the connections being served, on every listener. It asks
// the gate whether a new one may be served, and closes one that has not
// completed CONNECT and authentication within the connect timeout.
//
// Mochi v2.7.9 calls ClientsWg.Add inside each connection's goroutine,
// racing with the Wait in Server.Close; closing and joining every
// connection before Server.Close keeps that Wait at zero with no concurrent
// Add.
type conns struct {
	gate    *gate
	timeout time.Duration // connect timeout
	expired func()        // called for each connection closed for its timeout

	mu     sync.Mutex
	closed bool                  // guarded by mu
	open   map[net.Conn]*tracked // guarded by mu
	wg     sync.WaitGroup        // counts open
}

// tracked is what conns knows of one connection.
type tracked struct {
	addr    netip.Addr  // the peer's address, the gate's key
	pending bool        // not yet authenticated
	expired bool        // closed for its connect timeout
	timer   *time.Timer // fires the connect timeout while pending
}

// connEnd describes how a served connection ended.
type connEnd struct {
	addr    netip.Addr
	closing bool // the broker was closing it
	pending bool // it never authenticated
	expired bool // it was closed for its connect timeout
}

// track wraps establish so each connection is admitted by the gate (or
// closed at once, reported to refused), registered while it is served, and
// refused once closeAll has begun. How it ended goes to ended, not to
// mochi's listener log.
func (c *conns) track(establish listeners.EstablishFn, refused func(conn net.Conn, reason string),
	ended func(conn net.Conn, end connEnd, err error)) listeners.EstablishFn {
	return func(id string, conn net.Conn) error {
		switch reason := c.add(conn); reason {
		case "":
		case refusedClosing:
			_ = conn.Close()
			ended(conn, connEnd{closing: true}, ErrClosed)
			return nil
		default:
			refused(conn, reason) // counted before the close that others observe
			_ = conn.Close()
			return nil
		}
		err := establish(id, conn)
		end := c.detach(conn)
		ended(conn, end, err)
		c.wg.Done()
		return nil
	}
}

// closing reports whether closeAll has begun.
func (c *conns) closing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// add registers conn, pending, and starts its connect timeout; it returns
// why conn is refused instead, if it is.
func (c *conns) add(conn net.Conn) (refused string) {
	addr := sourceAddr(conn)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return refusedClosing
	}
	if reason := c.gate.admit(addr); reason != "" {
		return reason
	}
	if c.open == nil {
		c.open = map[net.Conn]*tracked{}
	}
	t := &tracked{addr: addr, pending: true}
	t.timer = time.AfterFunc(c.timeout, func() { c.expire(conn) })
	c.open[conn] = t
	c.wg.Add(1)
	return ""
}

// expire closes conn if it is still pending.
func (c *conns) expire(conn net.Conn) {
	c.mu.Lock()
	t := c.open[conn]
	if t == nil || !t.pending || t.expired {
		c.mu.Unlock()
		return
	}
	t.expired = true
	c.mu.Unlock()
	c.expired() // counted before the close that others observe
	_ = conn.Close()
}

// authenticated ends conn's pending state once the client has
// authenticated. It reports false if the connect timeout closed conn
// first. A connection conns does not know (the in-process client) is
// always authenticated.
func (c *conns) authenticated(conn net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.open[conn]
	switch {
	case t == nil:
		return true
	case t.expired:
		return false
	case t.pending:
		t.pending = false
		t.timer.Stop()
		c.gate.authenticated()
	}
	return true
}

// detach unregisters conn once its client has been detached, and returns
// how it ended. The caller then calls wg.Done.
func (c *conns) detach(conn net.Conn) connEnd {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.open[conn]
	delete(c.open, conn)
	t.timer.Stop()
	c.gate.release(t.addr, t.pending)
	return connEnd{addr: t.addr, closing: c.closed, pending: t.pending, expired: t.expired}
}

// closeAll refuses new connections, closes the open ones and waits until
// mochi has detached every client (publishing will messages meanwhile).
func (c *conns) closeAll() {
	c.mu.Lock()
	c.closed = true
	for conn := range c.open {
		_ = conn.Close()
	}
	c.mu.Unlock()
	c.wg.Wait()
}
