package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
)

// errLinkDown is what a simulated link failure looks like to the MQTT
// client: a read or dial error (not "use of closed network connection",
// which paho would take for its own clean close).
var errLinkDown = errors.New("simulated link down")

// Link is one device's network: it dials the broker from the device's
// source address, counts bytes, and can be cut (the connection fails
// abruptly, so the broker publishes the will, and dials are refused) and
// restored. The fault-injection tests use it too.
type Link struct {
	src   *net.TCPAddr  // nil lets the kernel choose
	bytes *byteCounters // nil counts nothing

	mu   sync.Mutex // guards down and conn
	down bool
	conn *linkConn // the latest connection
}

// byteCounters are fleet-wide traffic totals.
type byteCounters struct{ in, out atomic.Uint64 }

// NewLink returns a link dialing from src (nil: any address).
func NewLink(src *net.TCPAddr) *Link { return &Link{src: src} }

// Dial is the device's mqttclient.Options.Dial.
func (l *Link) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if l.Down() {
		return nil, errLinkDown
	}
	d := net.Dialer{}
	if l.src != nil {
		d.LocalAddr = l.src
	}
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	lc := &linkConn{Conn: c, bytes: l.bytes}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down {
		_ = c.Close()
		return nil, errLinkDown
	}
	l.conn = lc
	return lc, nil
}

// Down reports whether the link is cut.
func (l *Link) Down() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.down
}

// SetDown cuts the link (failing its connection abruptly, so the broker
// publishes the will) or restores it.
func (l *Link) SetDown(down bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.down = down
	if down && l.conn != nil {
		l.conn.cut()
		l.conn = nil
	}
}

// linkConn counts traffic and turns the errors of a cut connection into
// errLinkDown.
type linkConn struct {
	net.Conn
	bytes *byteCounters
	isCut atomic.Bool
}

func (c *linkConn) cut() {
	c.isCut.Store(true)
	_ = c.Conn.Close()
}

func (c *linkConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if c.bytes != nil {
		c.bytes.in.Add(uint64(n))
	}
	if err != nil && c.isCut.Load() {
		err = errLinkDown
	}
	return n, err
}

func (c *linkConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if c.bytes != nil {
		c.bytes.out.Add(uint64(n))
	}
	if err != nil && c.isCut.Load() {
		err = errLinkDown
	}
	return n, err
}

// ParseSourceRange parses "FIRST-LAST" (IPv4, same /24 or not) into the
// addresses in between, inclusive; "" means none (the kernel chooses).
func ParseSourceRange(s string) ([]netip.Addr, error) {
	if s == "" {
		return nil, nil
	}
	first, last, ok := strings.Cut(s, "-")
	if !ok {
		return nil, fmt.Errorf("source range %q: want FIRST-LAST, such as 127.0.0.2-127.0.0.254", s)
	}
	a, err := netip.ParseAddr(first)
	if err != nil {
		return nil, fmt.Errorf("source range %q: %w", s, err)
	}
	b, err := netip.ParseAddr(last)
	if err != nil {
		return nil, fmt.Errorf("source range %q: %w", s, err)
	}
	if a.BitLen() != b.BitLen() || b.Less(a) {
		return nil, fmt.Errorf("source range %q: LAST must not be below FIRST, same family", s)
	}
	var out []netip.Addr
	for ip := a; ip.Compare(b) <= 0 && len(out) < 1<<16; ip = ip.Next() {
		out = append(out, ip)
	}
	return out, nil
}
