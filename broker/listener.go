package broker

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"
)

// Accept back-off, as net/http's Server.Serve: 5 ms, doubling to 1 s.
const (
	minAcceptDelay = 5 * time.Millisecond
	maxAcceptDelay = time.Second
)

// retryListener is a net.Listener whose Accept keeps trying after an error
// (EMFILE and ENFILE when file descriptors run out, ECONNABORTED, ...)
// instead of returning it: mochi's accept loop ends for good on the first
// error. It waits between attempts, minAcceptDelay doubling to
// maxAcceptDelay, and reports each error to failed and the first success
// after errors to recovered. Accept returns an error only once the listener
// is closed.
type retryListener struct {
	net.Listener
	failed    func(err error, retryIn time.Duration)
	recovered func()

	closeOnce sync.Once
	done      chan struct{} // closed by Close
}

func newRetryListener(ln net.Listener, failed func(error, time.Duration), recovered func()) *retryListener {
	return &retryListener{Listener: ln, failed: failed, recovered: recovered, done: make(chan struct{})}
}

// Accept waits for the next connection, retrying through errors until the
// listener is closed.
func (l *retryListener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		conn, err := l.Listener.Accept()
		if err == nil {
			if delay > 0 {
				l.recovered()
			}
			return conn, nil
		}
		if l.isClosed() || errors.Is(err, net.ErrClosed) {
			return nil, err
		}
		delay = min(max(2*delay, minAcceptDelay), maxAcceptDelay)
		l.failed(err, delay)
		if !l.wait(delay) {
			return nil, net.ErrClosed
		}
	}
}

// wait sleeps for d, or until Close; it reports whether the listener is
// still open.
func (l *retryListener) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.done:
		return false
	}
}

func (l *retryListener) isClosed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// Close closes the listener and ends a waiting Accept. It is safe to call
// more than once.
func (l *retryListener) Close() error {
	err := net.ErrClosed
	l.closeOnce.Do(func() {
		close(l.done)
		err = l.Listener.Close()
	})
	return err
}

// listenerHealth records which listeners cannot accept connections: those
// whose Accept is failing now, and those whose accept loop ended while the
// broker was not closing.
type listenerHealth struct {
	mu     sync.Mutex
	faults map[string]error // guarded by mu; by listener ID
}

// set records (err != nil) or clears the fault of listener id.
func (h *listenerHealth) set(id string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		delete(h.faults, id)
		return
	}
	if h.faults == nil {
		h.faults = map[string]error{}
	}
	h.faults[id] = err
}

// err describes every fault, listeners in ID order, or returns nil.
func (h *listenerHealth) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.faults) == 0 {
		return nil
	}
	ids := make([]string, 0, len(h.faults))
	for id := range h.faults {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	msgs := make([]string, len(ids))
	for i, id := range ids {
		msgs[i] = fmt.Sprintf("listener %s: %v", id, h.faults[id])
	}
	return errors.New(strings.Join(msgs, "; "))
}
