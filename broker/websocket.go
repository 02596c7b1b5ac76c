package broker

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mochi-mqtt/server/v2/listeners"
)

// wsListener serves MQTT over WebSocket as mochi's listeners.Websocket
// does, but on a listener the broker binds in New (a bad address fails at
// once) and wraps in retryListener (accept errors are retried and reported
// like the TCP listener's), with the HTTP upgrade request bounded by the
// connect timeout rather than mochi's fixed 60 s. After the upgrade the
// connection is served, and limited, like any other.
type wsListener struct {
	id       string
	ln       net.Listener // TLS-wrapped when configured
	tls      bool
	srv      *http.Server
	upgrader websocket.Upgrader

	establish listeners.EstablishFn // set by Serve before the server starts
	closeOnce sync.Once
}

var _ listeners.Listener = (*wsListener)(nil)

// newWSListener serves on ln; connectTimeout bounds the upgrade, and at
// most maxUpgrading connections may be waiting for theirs: past it a new
// one is closed at accept and passed to refused.
func newWSListener(id string, ln net.Listener, tls bool, connectTimeout time.Duration, maxUpgrading int,
	refused func(net.Conn), errorLog *slog.Logger) *wsListener {
	ln = &upgradingListener{Listener: ln, max: maxUpgrading, refused: refused}
	l := &wsListener{id: id, ln: ln, tls: tls, upgrader: websocket.Upgrader{
		Subprotocols:     []string{"mqtt"},
		CheckOrigin:      func(*http.Request) bool { return true }, // devices send no Origin; tokens authenticate
		HandshakeTimeout: connectTimeout,
	}}
	l.srv = &http.Server{
		Handler:           l,
		ReadHeaderTimeout: connectTimeout,
		ErrorLog:          slog.NewLogLogger(errorLog.Handler(), slog.LevelDebug),
	}
	// Only upgrades are served: a connection whose request is anything
	// else is answered and closed, not kept alive (with no idle timeout)
	// outside every cap.
	l.srv.SetKeepAlivesEnabled(false)
	return l
}

// upgradingListener bounds the connections accepted that have not
// completed their WebSocket upgrade, which the broker's caps on pending
// and per-source connections do not see yet.
type upgradingListener struct {
	net.Listener
	max     int
	refused func(net.Conn)

	mu sync.Mutex
	n  int // guarded by mu: accepted, not upgraded, not closed
}

func (l *upgradingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		full := l.n >= l.max
		if !full {
			l.n++
		}
		l.mu.Unlock()
		if !full {
			return &upgradingConn{Conn: c, l: l}, nil
		}
		_ = c.Close()
		l.refused(c)
	}
}

// upgradingConn holds its place in an upgradingListener until it is
// upgraded or closed.
type upgradingConn struct {
	net.Conn
	l    *upgradingListener
	once sync.Once
}

// upgraded frees the connection's place; safe to call twice.
func (c *upgradingConn) upgraded() {
	c.once.Do(func() {
		c.l.mu.Lock()
		c.l.n--
		c.l.mu.Unlock()
	})
}

func (c *upgradingConn) Close() error {
	c.upgraded()
	return c.Conn.Close()
}

func (l *wsListener) ID() string      { return l.id }
func (l *wsListener) Address() string { return l.ln.Addr().String() }

func (l *wsListener) Protocol() string {
	if l.tls {
		return "wss"
	}
	return "ws"
}

func (l *wsListener) Init(*slog.Logger) error { return nil }

// Serve serves upgrade requests until Close.
func (l *wsListener) Serve(establish listeners.EstablishFn) {
	l.establish = establish
	_ = l.srv.Serve(l.ln) // returns once Close has closed the listener
}

// Close stops accepting and closes the connections not yet upgraded;
// closeClients closes the upgraded ones.
func (l *wsListener) Close(closeClients listeners.CloseFn) {
	l.closeOnce.Do(func() { _ = l.srv.Close() })
	closeClients(l.id)
}

// ServeHTTP upgrades the request and serves the connection as MQTT.
func (l *wsListener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := l.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered the client
	}
	defer c.Close()
	if uc, ok := c.UnderlyingConn().(*upgradingConn); ok {
		uc.upgraded() // the broker's own caps apply from here on
	}
	_ = l.establish(l.id, &wsConn{Conn: c.UnderlyingConn(), c: c})
}

// errNotBinary: MQTT over WebSocket travels in binary messages only.
var errNotBinary = errors.New("websocket message is not binary")

// wsConn is a WebSocket connection as the byte stream mochi reads: each
// binary message's payload in turn. Deadlines and Close act on the
// underlying connection.
type wsConn struct {
	net.Conn
	c *websocket.Conn
	r io.Reader // the message being read, or nil
}

func (ws *wsConn) Read(p []byte) (int, error) {
	for {
		if ws.r == nil {
			op, r, err := ws.c.NextReader()
			if err != nil {
				return 0, err
			}
			if op != websocket.BinaryMessage {
				return 0, errNotBinary
			}
			ws.r = r
		}
		n, err := ws.r.Read(p)
		if errors.Is(err, io.EOF) {
			ws.r = nil // the message ends; go on with the next one
			if n == 0 {
				continue
			}
			return n, nil
		}
		if err != nil {
			ws.r = nil
		}
		return n, err
	}
}

func (ws *wsConn) Write(p []byte) (int, error) {
	if err := ws.c.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}
