package mqttclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/edgeset/edgeset/internal/checkfor"
)

// recordingDialer dials from a fixed local address and remembers every
// call and connection.
type recordingDialer struct {
	local *net.TCPAddr
	fail  error

	mu    sync.Mutex // guards the fields below
	addrs []string
	conns []net.Conn
}

func (d *recordingDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, network+" "+addr)
	d.mu.Unlock()
	if d.fail != nil {
		return nil, d.fail
	}
	conn, err := (&net.Dialer{LocalAddr: d.local}).DialContext(ctx, network, addr)
	if err == nil {
		d.mu.Lock()
		d.conns = append(d.conns, conn)
		d.mu.Unlock()
	}
	return conn, err
}

func (d *recordingDialer) calls() ([]string, []net.Conn) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.addrs...), append([]net.Conn(nil), d.conns...)
}

func TestDialPicksSourceAddress(t *testing.T) {
	_, url := startMochi(t)
	d := &recordingDialer{local: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	rec := newRecorder()
	opts := testOptions(url, "dialed")
	opts.Dial = d.dial
	opts.Handler = rec.handle
	opts.Subscriptions = []Subscription{{Filter: "t/#", QoS: 1}}
	c := newClient(t, opts)
	startConnected(t, c)

	publishUntilReceived(t, c, rec, "t/x", "hello")
	addrs, conns := d.calls()
	if len(addrs) != 1 || addrs[0] != "tcp "+url[len("tcp://"):] {
		t.Fatalf("Dial calls = %q, want one to tcp %s", addrs, url)
	}
	if got := conns[0].LocalAddr().(*net.TCPAddr).IP.String(); got != "127.0.0.2" {
		t.Errorf("local address = %s, want 127.0.0.2", got)
	}

	// A failure of the dialed connection (EOF on read) is a connection loss:
	// the client dials again.
	_ = conns[0].(*net.TCPConn).CloseRead()
	checkfor.Eventually(t, 10*time.Second, 10*time.Millisecond, func() error {
		if _, conns := d.calls(); len(conns) < 2 || !c.Connected() {
			addrs, conns := d.calls()
			return fmt.Errorf("not reconnected through Dial yet: %d dials, %d conns, %+v", len(addrs), len(conns), c.Stats())
		}
		return nil
	})
}

func TestDialFailureIsAConnectFailure(t *testing.T) {
	_, url := startMochi(t)
	d := &recordingDialer{fail: errors.New("link down")}
	opts := testOptions(url, "dial-fails")
	opts.Dial = d.dial
	c := newClient(t, opts)
	start(t, c)
	checkfor.Eventually(t, 5*time.Second, 10*time.Millisecond, func() error {
		if st := c.Stats(); st.ConnectFailures < 2 || st.Connects != 0 {
			return errors.New("want repeated connect failures and no connection")
		}
		return nil
	})
}

func TestDialWithTLS(t *testing.T) {
	pki := newTestPKI(t)
	url := startMochiTLS(t, pki.server)
	d := &recordingDialer{local: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 3)}}
	opts := testOptions(url, "dialed-tls")
	opts.CAFile = pki.caFile
	opts.Dial = d.dial
	c := newClient(t, opts)
	startConnected(t, c)
	if addrs, _ := d.calls(); len(addrs) != 1 {
		t.Fatalf("Dial calls = %q, want 1", addrs)
	}
}
