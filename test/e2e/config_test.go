package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/sealing"
	"github.com/edgeset/edgeset/test/testimage"
)

// secretValue is the API key of the test's Secret: a string no other
// message can contain by chance.
const secretValue = "e2e-api-key-7f3a9c1d5b"

// configManifest is a ConfigMap, a Secret and an unchanged-style apps/v1
// DaemonSet that uses them the way upstream log shippers and agents do: a
// configMap volume, envFrom with a prefix, a secretKeyRef, the downward API
// in $(VAR) args, an init container writing into a shared emptyDir, a
// DirectoryOrCreate hostPath and every capability dropped. It runs on the
// nodes labelled e2e-role=reader. %[1]s is the image, %[2]s the host path,
// %[3]s the ConfigMap's log level.
const configManifest = `apiVersion: v1
kind: ConfigMap
metadata: {name: app-config, namespace: e2e}
data:
  app.conf: "level=%[3]s\n"
  FOO: bar
---
apiVersion: v1
kind: Secret
metadata: {name: api-key, namespace: e2e}
type: Opaque
stringData:
  key: ` + secretValue + `
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: reader, namespace: e2e}
spec:
  selector: {matchLabels: {app: reader}}
  template:
    metadata: {labels: {app: reader}}
    spec:
      nodeSelector: {e2e-role: reader}
      terminationGracePeriodSeconds: 3
      initContainers:
      - name: setup
        image: "%[1]s"
        imagePullPolicy: Never
        args: [write, /shared/init-done]
        volumeMounts: [{name: shared, mountPath: /shared}]
      containers:
      - name: main
        image: "%[1]s"
        imagePullPolicy: Never
        args: [show, "--node=$(NODE_NAME)", "--escaped=$$(NODE_NAME)"]
        env:
        - name: NODE_NAME
          valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
        - name: POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
        - name: API_KEY
          valueFrom: {secretKeyRef: {name: api-key, key: key}}
        - name: SHOW_FILES
          value: /etc/app/app.conf:/shared/init-done
        envFrom:
        - prefix: CFG_
          configMapRef: {name: app-config}
        securityContext:
          capabilities: {drop: [ALL]}
        volumeMounts:
        - {name: config, mountPath: /etc/app, readOnly: true}
        - {name: shared, mountPath: /shared}
        - {name: data, mountPath: /data}
      volumes:
      - name: config
        configMap: {name: app-config}
      - name: shared
        emptyDir: {}
      - name: data
        hostPath: {path: "%[2]s", type: DirectoryOrCreate}
`

// TestDockerConfigObjects runs configManifest on a real engine and checks
// what the daemon sees (its own output, read through the controller's logs
// API as edgesetctl logs reads it), what Docker was asked, that a
// ConfigMap change reaches the running daemon's file without a restart,
// and that the Secret's value travels on no MQTT topic in any readable
// form: sealed to the node that runs the daemon, whose key alone opens it,
// and never in the clear in the controller's store or an agent's data dir.
func TestDockerConfigObjects(t *testing.T) {
	cli := testimage.RequireDocker(t)
	image := testimage.Build(t)
	// The sniffer subscribes to # before anything is retained: mochi
	// v2.7.9 scans the retained messages for a wildcard subscription
	// without the lock its retained-message writes hold, which the race
	// detector reports when the controller publishes meanwhile.
	var sniff *sniffer
	f := startFleetThen(t, cli, 2, func(f *fleet) { sniff = startSniffer(t, f) })
	reader, other := f.nodes[0], f.nodes[1]
	label := "reader"
	_, err := f.api.UpdateNode(t.Context(), reader, api.NodePatch{Labels: map[string]*string{"e2e-role": &label}})
	require.NoError(t, err)

	hostDir := filepath.Join(t.TempDir(), "created", "data")
	f.applyAll(t, fmt.Sprintf(configManifest, image, hostDir, "info"))
	const key = "e2e/reader"

	var out string
	checkfor.Eventually(t, wait, poll, func() error {
		out, err = f.logs(t, key, reader)
		if err != nil {
			return err
		}
		for _, want := range []string{"file: /shared/init-done: edgeset", "capeff:"} {
			if !strings.Contains(out, want) {
				return fmt.Errorf("daemon output lacks %q so far:\n%s", want, out)
			}
		}
		return nil
	})
	for _, want := range []string{
		"arg: --node=" + reader,
		"arg: --escaped=$(NODE_NAME)",
		"env: NODE_NAME=" + reader,
		"env: API_KEY=" + secretValue,
		"env: CFG_FOO=bar",
		"env: CFG_app.conf=level=info", // a valid name since Kubernetes 1.34 relaxed them
		"file: /etc/app/app.conf: level=info\\n",
		"capeff: 0000000000000000",
	} {
		assert.Contains(t, out, want)
	}
	t.Logf("what the daemon saw:\n%s", out)
	assert.Regexp(t, `env: POD_NAME=reader-[a-z0-9]{5}\n`, out)
	assert.Regexp(t, `env: HOSTNAME=reader-[a-z0-9]{5}\n`, out, "a pod's host name is its name")
	f.requireInspect(t, key, reader, hostDir)
	st, err := os.Stat(hostDir)
	require.NoError(t, err, "DirectoryOrCreate must create the host path")
	assert.True(t, st.IsDir())

	before := f.containersOf(t, key)[reader]
	f.applyAll(t, fmt.Sprintf(configManifest, image, hostDir, "debug"))
	checkfor.Eventually(t, wait, poll, func() error {
		out, err := f.logs(t, key, reader)
		if err != nil {
			return err
		}
		if !strings.Contains(out, "file: /etc/app/app.conf: level=debug\\n") {
			return fmt.Errorf("the ConfigMap change has not reached the daemon's file:\n%s", out)
		}
		return nil
	})
	assert.Equal(t, snapshot{reader: before}.ids(), snapshot{reader: f.containersOf(t, key)[reader]}.ids(),
		"a ConfigMap change updates files in place, without recreating containers")

	sniff.requireSecretSealedTo(t, reader, f.nodeKeys(t, reader), f.nodeKeys(t, other))
	for _, dir := range []string{f.dataDir, f.agentDirs[reader], f.agentDirs[other]} {
		requireNoPlaintext(t, dir)
	}
}

// nodeKeys reads node's sealing keys from its agent's data dir, as only
// the device can.
func (f *fleet) nodeKeys(t *testing.T, node string) sealing.Keyring {
	t.Helper()
	ring, err := sealing.ReadKeyFile(filepath.Join(f.agentDirs[node], sealing.KeyFile))
	require.NoError(t, err)
	return ring
}

// secretForms are the secret's value as it would appear if it travelled
// or rested in the clear: raw, and in base64 (as Secret data is in JSON).
var secretForms = []string{secretValue, base64.StdEncoding.EncodeToString([]byte(secretValue))}

// requireNoPlaintext fails the test if a file under dir (a controller's
// store, an agent's agent.db) holds the secret's value in the clear.
func requireNoPlaintext(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, form := range secretForms {
			if bytes.Contains(b, []byte(form)) {
				t.Errorf("%s holds the secret's value in the clear", p)
			}
		}
		return nil
	})
	require.NoError(t, err)
}

// applyAll sends a manifest of several objects and fails the test if the
// controller refuses any.
func (f *fleet) applyAll(t *testing.T, manifest string) {
	t.Helper()
	res, err := f.api.Apply(t.Context(), "e2e.yaml", []byte(manifest), false)
	require.NoError(t, err)
	require.NotEmpty(t, res)
}

// logs returns the whole log of the daemonset's main container on node.
func (f *fleet) logs(t *testing.T, key, node string) (string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	rc, err := f.api.Logs(ctx, api.LogsRequest{DaemonSet: key, Node: node, Container: "main"})
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

// requireInspect checks what the engine was asked for the main container
// of key on node, and that the init container ran to completion.
func (f *fleet) requireInspect(t *testing.T, key, node, hostDir string) {
	t.Helper()
	var main, setup string
	for _, c := range f.containersOf(t, key)[node] {
		switch c.Labels[edgeagent.LabelContainer] {
		case "main":
			main = c.ID
		case "setup":
			setup = c.ID
		}
	}
	require.NotEmpty(t, main, "main container")
	require.NotEmpty(t, setup, "init container")
	res, err := f.docker.ContainerInspect(t.Context(), main, client.ContainerInspectOptions{})
	require.NoError(t, err)
	c := res.Container
	assert.Equal(t, []string{"ALL"}, []string(c.HostConfig.CapDrop))
	assert.Contains(t, c.Config.Cmd, "--node="+node)
	assert.Contains(t, c.Config.Env, "NODE_NAME="+node)
	var bound bool
	for _, m := range c.Mounts {
		bound = bound || (m.Source == hostDir && m.Destination == "/data")
	}
	assert.True(t, bound, "hostPath %s mounted at /data: %+v", hostDir, c.Mounts)
	init, err := f.docker.ContainerInspect(t.Context(), setup, client.ContainerInspectOptions{})
	require.NoError(t, err)
	assert.False(t, init.Container.State.Running)
	assert.Equal(t, 0, init.Container.State.ExitCode)
}

// sniffer records every message the embedded broker delivers to a client
// with the controller's identity subscribed to "#".
type sniffer struct {
	mu   sync.Mutex // guards msgs
	msgs []sniffed
}

type sniffed struct {
	topic   string
	payload []byte
}

// startSniffer connects to f's broker as the controller identity, first in
// first out so no message is coalesced away.
func startSniffer(t *testing.T, f *fleet) *sniffer {
	t.Helper()
	s := &sniffer{}
	ready := make(chan struct{})
	var subscribed sync.Once
	c, err := mqttclient.New(mqttclient.Options{
		BrokerURL: f.brokerURL, ClientID: "e2e-sniffer",
		Username: credential.ControllerUsername, Password: credential.ControllerToken(f.secret),
		Subscriptions: []mqttclient.Subscription{{Filter: "#"}},
		Handler: func(topic string, payload []byte) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.msgs = append(s.msgs, sniffed{topic: topic, payload: append([]byte(nil), payload...)})
		},
		NoCoalesce:         func(string) bool { return true },
		EventBuffer:        1 << 16,
		FirstConnectJitter: -1,
		Backoff:            mqttclient.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond},
		OnConnect:          func(context.Context) { subscribed.Do(func() { close(ready) }) },
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select { // subscriptions are made before OnConnect
	case <-ready:
	case <-time.After(wait):
		t.Fatal("the sniffer did not connect")
	}
	return s
}

// requireSecretSealedTo fails the test if the sniffer saw the secret's
// value in any readable form on any topic, or never saw it sealed on
// node's secret topic; what it saw there opens with mine, node's keys,
// and not with other's. The daemon's log is left out: the daemon prints
// its environment, secret included, and the test reads it through the
// logs API, whose output travels as the container wrote it
// (docs/security.md).
func (s *sniffer) requireSecretSealedTo(t *testing.T, node string, mine, other sealing.Keyring) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	prefix := schema.NodeSecretTopic(node, "")
	sealed := 0
	for _, m := range s.msgs {
		if strings.HasSuffix(m.topic, "/"+schema.TopicLogsResponse) {
			continue
		}
		for _, form := range secretForms {
			if strings.Contains(string(m.payload), form) {
				t.Errorf("the secret's value travelled readable on %s", m.topic)
			}
		}
		hash, ok := strings.CutPrefix(m.topic, prefix)
		if !ok || len(m.payload) == 0 {
			continue
		}
		sm, err := schema.DecodeSealedSecretMessage(m.payload)
		require.NoError(t, err, "a secret travels sealed on %s", m.topic)
		plain, err := mine.OpenSecret(node, hash, sm.Sealed)
		require.NoError(t, err, "the node's own key opens it")
		require.Contains(t, string(plain), base64.StdEncoding.EncodeToString([]byte(secretValue)))
		_, err = other.OpenSecret(node, hash, sm.Sealed)
		require.ErrorIs(t, err, sealing.ErrNotForKey, "another node's key does not open it")
		sealed++
	}
	require.NotZero(t, sealed, "the sniffer never saw the sealed secret: it cannot vouch for how it travels (%d messages)", len(s.msgs))
	t.Logf("sniffer saw %d messages, %d carrying the sealed secret", len(s.msgs), sealed)
}
