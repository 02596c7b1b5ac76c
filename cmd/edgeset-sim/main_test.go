package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		{"unknown flag", []string{"--nodez", "3"}, "nodez"},
		{"stray argument", []string{"extra"}, "unexpected arguments"},
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
