package docker_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeset/edgeset/edgeagent/docker"
)

// fakeEngine serves /_ping on a unix socket announcing apiVersion, like an
// engine of that API version, and returns the socket's address.
func fakeEngine(t *testing.T, apiVersion string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "edgeset") // short: socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "engine.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("listen on %s: %v", sock, err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Api-Version", apiVersion)
		if r.URL.Path != "/_ping" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("OK"))
	}))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return "unix://" + sock
}

// TestAPIVersionNegotiation pins down which engines the runtime accepts: the
// client negotiates down to the engine's API version, but not below
// client.MinAPIVersion (1.40, Docker 19.03).
func TestAPIVersionNegotiation(t *testing.T) {
	t.Setenv("DOCKER_API_VERSION", "")
	cases := []struct {
		name    string
		engine  string
		pin     string
		want    string // negotiated version, "" if New must fail
		wantErr string
	}{
		{"docker 20.10", "1.41", "", "1.41", ""},
		{"docker 19.03", "1.40", "", "1.40", ""},
		{"docker 18.09", "1.39", "", "", "minimum supported API version is 1.40"},
		{"newer engine than client", "1.99", "", "1.56", ""},
		{"pinned", "1.41", "1.40", "1.40", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			host := fakeEngine(t, tc.engine)
			rt, err := docker.New(t.Context(), docker.Options{Host: host, APIVersion: tc.pin})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), host) {
					t.Fatalf("New against API %s: %v, want error naming %s and %q", tc.engine, err, host, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New against API %s: %v", tc.engine, err)
			}
			defer rt.Close()
			if got := rt.APIVersion(); got != tc.want {
				t.Errorf("APIVersion = %s, want %s", got, tc.want)
			}
			if rt.Host() != host {
				t.Errorf("Host = %s, want %s", rt.Host(), host)
			}
		})
	}
}
