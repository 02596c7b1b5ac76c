package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseShape(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr []string // substrings; none means success
		check   func(t *testing.T, s Shape)
	}{
		{name: "empty document is a plain fleet", yaml: "", check: func(t *testing.T, s Shape) {
			if s.Behaviour.CrashAfter != DefaultCrashAfter || s.Behaviour.Flapping.Down != DefaultFlapDown {
				t.Errorf("defaults not applied: %+v", s.Behaviour)
			}
		}},
		{name: "full shape", yaml: `seed: 3
labels:
  site: {a: 0.5, b: 0.5}
  kubernetes.io/arch: {arm64: 0.7, amd64: 0.3}
  hardware: {rpi4: 0.2}
taints:
- {key: dedicated, value: camera, effect: NoSchedule, probability: 0.05}
behaviour:
  startLatency: {min: 10ms, max: 200ms}
  readinessDelay: {min: 1s}
  imagePullFailure: 0.01
  crashLoop: 0.02
  crashAfter: {min: 2s, max: 3s}
  flapping: {probability: 0.1, every: {min: 30s, max: 2m}, down: {min: 5s, max: 20s}}
  offline: 0.03
  preloadedImages: [busybox:1.36]
`, check: func(t *testing.T, s Shape) {
			if s.Seed != 3 || s.Labels["site"]["b"] != 0.5 || s.Taints[0].Effect != "NoSchedule" {
				t.Errorf("parsed %+v", s)
			}
			if time.Duration(s.Behaviour.Flapping.Every.Max) != 2*time.Minute || s.Behaviour.PreloadedImages[0] != "busybox:1.36" {
				t.Errorf("behaviour %+v", s.Behaviour)
			}
		}},
		{name: "slow links", yaml: `behaviour:
  linkBytesPerSecond: 200000
  imageSizes: {"camera:2": 5000000}
  defaultImageSize: 1000000
  noPrefetch: 0.25
`, check: func(t *testing.T, s Shape) {
			p := s.Profile(0)
			if p.LinkBytesPerSecond != 200000 || p.ImageSize("camera:2") != 5000000 || p.ImageSize("other:1") != 1000000 {
				t.Errorf("profile %+v: want the link and sizes of the shape", p)
			}
		}},
		{name: "bad link and sizes", yaml: `behaviour:
  linkBytesPerSecond: -1
  imageSizes: {"camera:2": -5}
  defaultImageSize: -1
  noPrefetch: 2
`, wantErr: []string{
			"behaviour.noPrefetch: probability 2",
			"behaviour.linkBytesPerSecond: must not be negative",
			"behaviour.defaultImageSize: must not be negative",
			"behaviour.imageSizes.camera:2: must not be negative",
		}},
		{name: "unknown top-level key", yaml: "sead: 3\n", wantErr: []string{"sead"}},
		{name: "unknown nested key", yaml: "behaviour:\n  flapping: {probabilty: 0.1}\n", wantErr: []string{"probabilty"}},
		{name: "bad duration", yaml: "behaviour:\n  startLatency: {min: fast}\n", wantErr: []string{`"fast" is not a duration`, "line 2"}},
		{name: "every problem at once", yaml: `labels:
  site: {a: 0.7, b: 0.6}
  role: {"bad value!": 0.1}
taints:
- {key: x, effect: Sometimes, probability: 2}
behaviour:
  crashLoop: -0.1
  offline: 1.5
  startLatency: {min: -1s}
`, wantErr: []string{
			"labels.site: probabilities sum to 1.3",
			"labels.role",
			"taints[0].probability: probability 2",
			"taints[0]:",
			"behaviour.crashLoop",
			"behaviour.offline",
			"behaviour.startLatency: durations must not be negative",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseShape([]byte(tc.yaml))
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("ParseShape succeeded, want errors %q", tc.wantErr)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseShape: %v", err)
			}
			tc.check(t, s)
		})
	}
}

func TestLoadShapeNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(path, []byte("labls: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadShape(path)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "labls") {
		t.Fatalf("LoadShape error = %v, want it to name %s and the key", err, path)
	}
	if _, err := LoadShape(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "fleet file") {
		t.Fatalf("missing file error = %v", err)
	}
}
