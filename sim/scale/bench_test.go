package scale

import (
	"os"
	"strings"
	"testing"
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
