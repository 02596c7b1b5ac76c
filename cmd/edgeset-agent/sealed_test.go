package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io/fs"
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
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/sealing"
)

const sealedValue = "s3cr3t-from-the-controller"

var sealedManifests = fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: api-key, namespace: lab}
stringData: {token: %s}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: reader, namespace: lab}
spec:
  selector: {matchLabels: {app: reader}}
  template:
    metadata: {labels: {app: reader}}
    spec:
      nodeSelector: {site: lab}
      containers:
      - name: main
        image: busybox:1.36
        env:
        - name: TOKEN
          valueFrom: {secretKeyRef: {name: api-key, key: token}}
`, sealedValue)

// execute runs edgeset-agent with args and returns what it printed.
func execute(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	cmd := newRootCmd(&out)
	cmd.SetOut(&out)
	cmd.SetArgs(args)
	require.NoError(t, cmd.ExecuteContext(ctx), out.String())
	return out.String()
}

// TestEnrolledNodeGetsSealedSecretsAndRotatesItsKey: enroll makes the
// node's key and registers it with the code; the agent it configured
// opens the Secret the controller sealed to it and runs the daemon that
// reads it; `key rotate` (agent stopped) gives it a new key, which the
// agent registers at its next start by proving the old one. The data dir
// never holds the secret in the clear.
func TestEnrolledNodeGetsSealedSecretsAndRotatesItsKey(t *testing.T) {
	c, err := controller.New(controller.Config{DataDir: t.TempDir(), MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-c.Synced()
	server := "http://" + c.APIAddr().String()
	admin := api.NewClient(server, c.Token(), nil)
	code, err := admin.CreateEnrollment(ctx, api.EnrollmentRequest{Node: "lab-gw-1", Labels: map[string]string{"site": "lab"}})
	require.NoError(t, err)

	dir := t.TempDir()
	cfg, data := filepath.Join(dir, "etc", "agent.yaml"), filepath.Join(dir, "data")
	execute(t, ctx, "enroll", "--controller", server, "--code", code.Code, "--config", cfg)
	keyFile := filepath.Join(dir, "etc", sealing.KeyFile)
	fi, err := os.Stat(keyFile)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the private key is the device's own")
	ring, err := sealing.ReadKeyFile(keyFile)
	require.NoError(t, err)
	key, err := admin.GetNodeKey(ctx, "lab-gw-1")
	require.NoError(t, err)
	assert.Equal(t, ring.Current.KeyID(), key.KeyID, "registered with the enrollment")
	assert.Equal(t, "enrollment", key.Source)
	written, err := os.ReadFile(cfg)
	require.NoError(t, err)
	assert.Contains(t, string(written), "node-key-file: "+keyFile)
	assert.Contains(t, string(written), "controller-url: "+server)

	_, err = admin.Apply(ctx, "test.yaml", []byte(sealedManifests), false)
	require.NoError(t, err)
	agentArgs := []string{"--config", cfg, "--runtime", "fake", "--data-dir", data, "--log-level", "warn"}
	stop := runAgent(t, testLog{t}, agentArgs...)
	waitRunning := func() {
		t.Helper()
		checkfor.Eventually(t, 20*time.Second, 50*time.Millisecond, func() error {
			ins, err := admin.ListInstances(ctx)
			if err != nil {
				return err
			}
			for _, in := range ins {
				if in.Node == "lab-gw-1" && in.Phase == schema.PhaseRunning {
					return nil
				}
			}
			return fmt.Errorf("no running instance on lab-gw-1: %+v", ins)
		})
	}
	waitRunning()
	require.NoError(t, stop())

	out := execute(t, ctx, "key", "rotate", "--config", cfg, "--data-dir", data)
	rotated, err := sealing.ReadKeyFile(keyFile)
	require.NoError(t, err)
	assert.Contains(t, out, rotated.Current.KeyID())
	require.NotNil(t, rotated.Previous)
	assert.Equal(t, ring.Current.KeyID(), rotated.Previous.KeyID())

	stop = runAgent(t, testLog{t}, agentArgs...)
	checkfor.Eventually(t, 20*time.Second, 50*time.Millisecond, func() error {
		key, err := admin.GetNodeKey(ctx, "lab-gw-1")
		if err != nil {
			return err
		}
		if key.KeyID != rotated.Current.KeyID() || key.Source != "node rotation" {
			return fmt.Errorf("registered key %s (%s), want %s by rotation", key.KeyID, key.Source, rotated.Current.KeyID())
		}
		kept, err := sealing.ReadKeyFile(keyFile)
		if err != nil {
			return err
		}
		if kept.Previous != nil {
			return fmt.Errorf("the previous key is still kept")
		}
		return nil
	})
	waitRunning()
	require.NoError(t, stop())

	err = filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && (bytes.Contains(b, []byte(sealedValue)) || bytes.Contains(b, []byte(base64.StdEncoding.EncodeToString([]byte(sealedValue))))) {
			t.Errorf("%s holds the secret in the clear", p)
		}
		return err
	})
	require.NoError(t, err)
}

// TestKeyShowReadsTheEnvironment: `key show` reads the agent's
// configuration as the agent does, EDGESET_DATA_DIR included: the key it
// creates is the one the agent will use, not one in a default directory.
func TestKeyShowReadsTheEnvironment(t *testing.T) {
	data := t.TempDir()
	t.Setenv("EDGESET_DATA_DIR", data)
	t.Setenv("EDGESET_NODE_NAME", "env-gw-1")
	out := execute(t, t.Context(), "key", "show")
	keyFile := filepath.Join(data, sealing.KeyFile)
	assert.Contains(t, out, "created "+keyFile)
	ring, err := sealing.ReadKeyFile(keyFile)
	require.NoError(t, err)
	assert.Contains(t, out, ring.Current.Public().String())
}
