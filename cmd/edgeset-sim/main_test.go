package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgeset/edgeset/sim/scale"
)

func TestFlagErrorsNameTheFlag(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "fleet.secret")
	if err := os.WriteFile(secret, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badFleet := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(badFleet, []byte("labels: {site: {a: 2}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	failed := filepath.Join(dir, "failed.json")
	if err := os.WriteFile(failed, []byte(`{"nodes": 1000, "applySeconds": 0.7}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no credentials", []string{"--nodes", "1"}, "--fleet-secret-file"},
		{"both credentials", []string{"--fleet-secret-file", secret, "--token-file", secret}, "give one, not both"},
		{"missing secret", []string{"--fleet-secret-file", filepath.Join(dir, "nope")}, "--fleet-secret-file: fleet secret"},
		{"missing token file", []string{"--token-file", filepath.Join(dir, "nope")}, "--token-file: token file"},
		{"bad fleet file", []string{"--fleet-secret-file", secret, "--fleet", badFleet}, "labels.site.a: probability 2"},
		{"bad source range", []string{"--fleet-secret-file", secret, "--source-range", "x"}, "--source-range"},
		{"bad log level", []string{"--fleet-secret-file", secret, "--log-level", "loud"}, "--log-level"},
		{"bad prefix", []string{"--fleet-secret-file", secret, "--name-prefix", "Bad_"}, "name prefix"},
		{"bad subscribe qos", []string{"--fleet-secret-file", secret, "--subscribe-qos", "2"}, "--subscribe-qos: 2 is not 0 or 1"},
		{"bad publish qos", []string{"--fleet-secret-file", secret, "--publish-qos", "2"}, "--publish-qos: 2 is not 0 or 1"},
		{"unknown flag", []string{"--nodez", "3"}, "nodez"},
		{"stray argument", []string{"extra"}, "unexpected arguments"},
		{"summary without reports", []string{"--summary"}, "--summary: give the report files"},
		{"summary of a missing report", []string{"--summary", filepath.Join(dir, "nope.json")}, "--summary: open"},
		{"summary of a failed run", []string{"--summary", failed}, "not the report of a completed run"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), tc.args, &out, &errOut)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("run(%q) = %v, want an error containing %q", tc.args, err, tc.wantErr)
			}
		})
	}
}

// TestQoSFlagsReachTheFleet: --subscribe-qos and --publish-qos set the
// devices' QoS, 1 for both by default.
func TestQoSFlagsReachTheFleet(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "fleet.secret")
	if err := os.WriteFile(secret, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args                                   []string
		subscribeAtMostOnce, publishAtMostOnce bool
	}{
		{nil, false, false},
		{[]string{"--subscribe-qos", "0"}, true, false},
		{[]string{"--publish-qos", "0"}, false, true},
		{[]string{"--subscribe-qos", "0", "--publish-qos", "0"}, true, true},
	}
	for _, tc := range tests {
		f, err := parseFlags(append([]string{"--fleet-secret-file", secret}, tc.args...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		opts, err := fleetOptions(f)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if opts.SubscribeAtMostOnce != tc.subscribeAtMostOnce || opts.PublishAtMostOnce != tc.publishAtMostOnce {
			t.Errorf("%q: subscribe at most once %v, publish at most once %v; want %v, %v", tc.args,
				opts.SubscribeAtMostOnce, opts.PublishAtMostOnce, tc.subscribeAtMostOnce, tc.publishAtMostOnce)
		}
	}
}

func TestLinerPlainWhenNotATerminal(t *testing.T) {
	var buf bytes.Buffer
	l := newLiner(&buf)
	l.print("a")
	l.print("b")
	l.end()
	if buf.String() != "a\nb\n" {
		t.Errorf("output %q, want plain lines", buf.String())
	}
}

func TestSummaryPrintsSpreadPerSize(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for i, r := range []scale.Result{
		{Nodes: 1000, ApplySeconds: 0.8, RolloutSeconds: 0.6},
		{Nodes: 1000, ApplySeconds: 0.7, RolloutSeconds: 0.9},
		{Nodes: 1000, ApplySeconds: 0.9, RolloutSeconds: 0.7,
			ApplyCPU: scale.PhaseCPU{Controller: scale.CPUTime{UserSeconds: 0.3, SystemSeconds: 0.1}}},
	} {
		files = append(files, filepath.Join(dir, fmt.Sprintf("r%d.json", i)))
		if err := writeJSON(files[i], r); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), append([]string{"--summary"}, files...), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	want := "summary 1000 nodes, 3 runs: apply min 0.70s median 0.80s max 0.90s; rollout min 0.60s median 0.70s max 0.90s\n" +
		"summary 1000 nodes, 3 runs: CPU medians: apply controller 0.00s simulator 0.00s; rollout controller 0.00s simulator 0.00s\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}
