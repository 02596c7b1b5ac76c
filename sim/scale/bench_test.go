package scale

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

func TestFindSample(t *testing.T) {
	text := `# HELP edgeset_nodes Known nodes by presence.
# TYPE edgeset_nodes gauge
edgeset_nodes{state="offline"} 3
edgeset_nodes{state="online"} 9997
edgeset_mqtt_bytes_out_total 1.2345e+06
`
	tests := []struct {
		series  string
		want    float64
		wantErr string
	}{
		{`edgeset_nodes{state="online"}`, 9997, ""},
		{`edgeset_nodes{state="offline"}`, 3, ""},
		{"edgeset_mqtt_bytes_out_total", 1234500, ""},
		{"edgeset_nodes", 0, "not found"},
	}
	for _, tc := range tests {
		t.Run(tc.series, func(t *testing.T) {
			got, err := findSample(text, tc.series)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("findSample = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestProcessRSS(t *testing.T) {
	rss, err := ProcessRSS(os.Getpid())
	if err != nil || rss < 1<<20 {
		t.Fatalf("ProcessRSS(self) = %d, %v; want at least 1 MiB", rss, err)
	}
	if _, err := ProcessRSS(-1); err == nil {
		t.Error("ProcessRSS of no process must fail")
	}
}

func TestRaiseFDLimit(t *testing.T) {
	if err := RaiseFDLimit(); err != nil {
		t.Fatal(err)
	}
}

// TestNotOnlineNamesOfflineNodes: a registration that stalls says how many
// nodes the controller lists and which it holds offline since when.
func TestNotOnlineNamesOfflineNodes(t *testing.T) {
	since := time.Date(2026, 12, 1, 13, 45, 3, 0, time.UTC)
	nodes := []api.Node{
		{Node: schema.Node{Name: "sim-00001"}, Online: true},
		{Node: schema.Node{Name: "sim-00002"}, OfflineSince: &since},
		{Node: schema.Node{Name: "sim-00003"}},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/nodes") {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(nodes)
	}))
	defer srv.Close()
	b := &bench{opts: Options{Nodes: 4}, api: api.NewClient(srv.URL, "token", srv.Client())}
	want := "the controller lists 3 of 4 nodes; offline: sim-00002 (offline since 2026-12-01T13:45:03Z), sim-00003 (offline since unknown)"
	if got := b.notOnline(context.Background()); got != want {
		t.Errorf("notOnline:\n got %s\nwant %s", got, want)
	}
}

func TestTrafficPerPhase(t *testing.T) {
	before := Traffic{MessagesIn: 100, MessagesOut: 50, BytesOut: 5000}
	after := Traffic{MessagesIn: 4100, MessagesOut: 2050, BytesOut: 267000}
	got := after.sub(before)
	if want := (Traffic{MessagesIn: 4000, MessagesOut: 2000, BytesOut: 262000}); got != want {
		t.Fatalf("sub = %+v, want %+v", got, want)
	}
	if line, want := got.Line("apply", 2000), "apply MQTT per node: 2.00 messages in, 1.00 out, 131 payload bytes out"; line != want {
		t.Fatalf("Line = %q, want %q", line, want)
	}
}
