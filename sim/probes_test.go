package sim

import (
	"context"
	"net/http"
	"testing"
)

// TestDialDaemonAnswersInProcess: a probe of a simulated container's
// made-up address is answered by dialDaemon, healthy, on any path, and
// never reaches a network.
func TestDialDaemonAnswersInProcess(t *testing.T) {
	client := &http.Client{Transport: &http.Transport{DialContext: dialDaemon}}
	for _, url := range []string{"http://10.1.2.3:2020/", "http://10.9.9.9:9100/ready", "http://203.0.113.7/healthz"} {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status %d, want 200", url, resp.StatusCode)
		}
	}
	conn, err := dialDaemon(context.Background(), "tcp", "10.1.2.3:9100")
	if err != nil {
		t.Fatalf("tcp dial: %v", err)
	}
	if err := conn.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := dialDaemon(ctx, "tcp", "10.1.2.3:9100"); err == nil {
		t.Error("a dial with an ended context succeeded")
	}
}
