package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestUIRoutedBeforeAuth: with Options.UI, / and /ui/... reach the UI
// without a bearer token; every other path still needs one.
func TestUIRoutedBeforeAuth(t *testing.T) {
	ui := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "dashboard") })
	s := New(nil, Options{Token: "t", UI: ui})
	cases := []struct {
		path string
		want int
		ui   bool
	}{
		{"/", http.StatusOK, true},
		{"/ui", http.StatusOK, true},
		{"/ui/nodes", http.StatusOK, true},
		{"/uix", http.StatusUnauthorized, false},
		{"/api/v1/version", http.StatusUnauthorized, false},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			if rec.Code != tc.want || (rec.Body.String() == "dashboard") != tc.ui {
				t.Errorf("GET %s = %d %q, want %d (dashboard: %t)", tc.path, rec.Code, rec.Body.String(), tc.want, tc.ui)
			}
		})
	}
	rec := httptest.NewRecorder()
	New(nil, Options{Token: "t"}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui/", nil))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("without Options.UI, GET /ui/ = %d, want 401", rec.Code)
	}
}
