package scale

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// TestDebugServerLimits: the debug listener refuses an oversized header
// block, and its write timeout still leaves room for a CPU profile.
func TestDebugServerLimits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newDebugServer()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	base := "http://" + ln.Addr().String()

	req, err := http.NewRequest(http.MethodGet, base+"/heap", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Padding", strings.Repeat("p", 128<<10)) // net/http accepts 1 MiB by default
	if code := status(t, req); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("oversized header block: %d, want 431", code)
	}

	req, err = http.NewRequest(http.MethodGet, base+"/debug/pprof/profile?seconds=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if code := status(t, req); code != http.StatusOK {
		t.Errorf("CPU profile: %d, want 200", code)
	}
}

func status(t *testing.T, req *http.Request) int {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
