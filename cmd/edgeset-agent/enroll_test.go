package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/internal/checkfor"
)

// TestEnrollThenRun: a device enrolls with a code and then runs from the
// config enroll wrote, with nothing pasted by hand; the controller lists
// it online with the code's labels.
func TestEnrollThenRun(t *testing.T) {
	c, err := controller.New(controller.Config{DataDir: t.TempDir(), MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-c.Synced()
	server := "http://" + c.APIAddr().String()
	admin := api.NewClient(server, c.Token(), nil)
	code, err := admin.CreateEnrollment(ctx, api.EnrollmentRequest{Uses: 2, NamePrefix: "lab-", Labels: map[string]string{"site": "lab"}})
	require.NoError(t, err)

	dir := t.TempDir()
	t.Chdir(dir) // enroll is given a relative --config, as a shell user would
	cfg := filepath.Join("etc", "agent.yaml")
	enrollArgs := []string{"enroll", "--controller", server, "--code", code.Code, "--node", "lab-gw-1", "--config", cfg}
	var out bytes.Buffer
	cmd := newRootCmd(&out)
	cmd.SetOut(&out)
	cmd.SetArgs(enrollArgs)
	require.NoError(t, cmd.ExecuteContext(ctx), out.String())
	assert.Contains(t, out.String(), "enrolled as node lab-gw-1")
	st, err := os.Stat(filepath.Join(dir, "etc", "token"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the token file is the device's secret")
	written, err := os.ReadFile(cfg)
	require.NoError(t, err)
	assert.Contains(t, string(written), "token-file: "+filepath.Join(dir, "etc", "token"), "an absolute path: the agent may run from anywhere")

	// A second enroll does not replace the config without --force.
	cmd = newRootCmd(&out)
	cmd.SetOut(&out)
	cmd.SetArgs(enrollArgs)
	assert.ErrorContains(t, cmd.ExecuteContext(ctx), "exists")

	stop := runAgent(t, testLog{t}, "--config", cfg, "--runtime", "fake", "--data-dir", filepath.Join(dir, "data"), "--log-level", "warn")
	defer func() { _ = stop() }()
	checkfor.Eventually(t, 15*time.Second, 50*time.Millisecond, func() error {
		n, err := admin.GetNode(ctx, "lab-gw-1")
		if err != nil {
			return err
		}
		if !n.Online || n.Labels["site"] != "lab" {
			return fmt.Errorf("node online %v, labels %v", n.Online, n.Labels)
		}
		return nil
	})
}

func TestEnrollNeedsControllerAndCode(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"enroll", "--code", "x"}, "--controller"},
		{[]string{"enroll", "--controller", "http://127.0.0.1:1"}, "--code"},
		{[]string{"enroll", "--controller", "http://127.0.0.1:1", "--code", "x", "--code-file", "y"}, "give one"},
		{[]string{"enroll", "--controller", "http://127.0.0.1:1", "--code", "x", "--ca-file", "/nonexistent"}, "--ca-file"},
	} {
		cmd := newRootCmd(&bytes.Buffer{})
		cmd.SetArgs(append(tt.args, "--config", filepath.Join(t.TempDir(), "agent.yaml")))
		assert.ErrorContains(t, cmd.Execute(), tt.want, "%v", tt.args)
	}
}
