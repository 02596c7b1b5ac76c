package etcdtest

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards TCP connections from a loopback port to a target address
// until it is cut. Cut partitions its clients from the target: open
// connections are closed and new ones are accepted but never answered, as a
// network that drops packets would do, so a client's calls hang until their
// own deadlines. Restore forwards again.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup // the accept loop and every connection's copiers

	mu     sync.Mutex // guards the fields below
	cut    bool
	closed bool
	conns  map[net.Conn]struct{} // client and target sides of open connections
}

// NewProxy starts a proxy to target and registers its shutdown with
// t.Cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("etcdtest: proxy listen: %v", err)
	}
	p := &Proxy{target: target, ln: ln, conns: make(map[net.Conn]struct{})}
	p.wg.Go(p.acceptLoop)
	t.Cleanup(p.close)
	return p
}

// Endpoint is the address clients dial, host:port on loopback.
func (p *Proxy) Endpoint() string { return p.ln.Addr().String() }

// Cut closes every open connection and answers no new one until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	p.closeConnsLocked()
}

// Restore ends a Cut: connections held silent are closed, so their clients
// dial again, and new ones are forwarded.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	p.closeConnsLocked()
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	p.closeConnsLocked()
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) closeConnsLocked() {
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

func (p *Proxy) acceptLoop() {
	for {
		c, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// serve forwards c to the target, or holds it silent while the proxy is cut.
func (p *Proxy) serve(c net.Conn) {
	cut, ok := p.track(c)
	if !ok {
		_ = c.Close()
		return
	}
	defer p.untrack(c)
	if cut {
		_, _ = io.Copy(io.Discard, c) // until Restore or shutdown closes c
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if _, ok := p.track(up); !ok {
		_ = up.Close()
		return
	}
	defer p.untrack(up)
	var copiers sync.WaitGroup
	copiers.Go(func() { pipe(up, c) })
	copiers.Go(func() { pipe(c, up) })
	copiers.Wait()
}

// pipe copies src to dst, then closes both so the other direction ends too.
func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

// track registers c so Cut and shutdown can close it, and says whether the
// proxy is cut; ok is false when the proxy is shut down and c must not be
// served.
func (p *Proxy) track(c net.Conn) (cut, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false, false
	}
	p.conns[c] = struct{}{}
	return p.cut, true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = c.Close()
	delete(p.conns, c)
}
