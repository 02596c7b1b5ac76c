package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/edgeagent/selfupdate"
	"github.com/edgeset/edgeset/schema"
)

func TestServesAgent(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"--config", "/etc/edgeset/agent.yaml", "--data-dir", "/var/lib/edgeset-agent"}, true},
		{[]string{"--node-name", "version"}, true},
		{[]string{"version", "--json"}, false},
		{[]string{"enroll", "--code", "x"}, false},
		{[]string{"--help"}, false},
		{[]string{"--config", "x", "--version"}, false},
		{[]string{"--", "--version"}, true},
	} {
		assert.Equal(t, tc.want, servesAgent(tc.args), "%q", tc.args)
	}
}

// TestVersionJSON: what an upgrade checks a new binary with.
func TestVersionJSON(t *testing.T) {
	var out bytes.Buffer
	cmd := newRootCmd(&out)
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"version", "--json"})
	require.NoError(t, cmd.Execute())
	var info selfupdate.VersionInfo
	require.NoError(t, json.Unmarshal(out.Bytes(), &info))
	assert.Equal(t, selfupdate.VersionInfo{Version: schema.Version, Platform: selfupdate.Platform(), SelfUpgrade: selfupdate.RecordFormat}, info)
}
