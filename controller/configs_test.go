package controller

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/sealing"
)

const secretValue = "s3cr3t-api-key-4711"

func configMapObj(ns, name string, data map[string]string) schema.Object {
	return schema.Object{Source: schema.Source{File: "test.yaml", Line: 1}, ConfigMap: &schema.ConfigMap{
		TypeMeta: schema.TypeMeta{APIVersion: schema.APIVersionCore, Kind: schema.KindConfigMap},
		Metadata: schema.ObjectMeta{Namespace: ns, Name: name}, Data: data,
	}}
}

func secretObj(ns, name string, data map[string]string) schema.Object {
	s := &schema.Secret{
		TypeMeta: schema.TypeMeta{APIVersion: schema.APIVersionCore, Kind: schema.KindSecret},
		Metadata: schema.ObjectMeta{Namespace: ns, Name: name}, Type: schema.SecretTypeOpaque, Data: map[string][]byte{},
	}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return schema.Object{Source: schema.Source{File: "test.yaml", Line: 1}, Secret: s}
}

// agentDS is a daemonset on role=gateway nodes that mounts ConfigMap
// "agent-config" and reads key "token" of Secret "api-key".
func agentDS(rollOnChange bool) schema.Object {
	ds := &schema.DaemonSet{
		TypeMeta: schema.TypeMeta{APIVersion: schema.APIVersionApps, Kind: schema.KindDaemonSet},
		Metadata: schema.ObjectMeta{Namespace: "edge", Name: "agent"},
		Spec: schema.DaemonSetSpec{
			Selector: &schema.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: schema.PodTemplateSpec{
				Metadata: schema.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec: schema.PodSpec{
					NodeSelector: map[string]string{"role": "gateway"},
					Containers: []schema.Container{{Name: "agent", Image: "registry.local/agent:1",
						Env: []schema.EnvVar{{Name: "TOKEN", ValueFrom: &schema.EnvVarSource{
							SecretKeyRef: &schema.SecretKeySelector{Name: "api-key", Key: "token"}}}},
						VolumeMounts: []schema.VolumeMount{{Name: "config", MountPath: "/etc/agent"}},
					}},
					Volumes: []schema.Volume{{Name: "config", ConfigMap: &schema.ConfigMapVolumeSource{Name: "agent-config"}}},
				},
			},
		},
	}
	if rollOnChange {
		ds.APIVersion = schema.APIVersionEdgeset
		ds.Spec.Rollout = &schema.RolloutPolicy{RollOnConfigChange: true}
	}
	schema.SetDefaults(ds)
	return schema.Object{Source: schema.Source{File: "test.yaml", Line: 1}, DaemonSet: ds}
}

func (tc *testController) apply(t *testing.T, objs ...schema.Object) []api.ApplyResult {
	t.Helper()
	res, err := tc.applyObjects(objs, nil, applyRequest{source: "test"})
	require.NoError(t, err)
	return res
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// spy is an MQTT client with the controller's identity that records
// every message on every topic.
type spy struct {
	mu   sync.Mutex
	msgs map[string][]string // topic -> payloads, in order
}

func startSpy(t *testing.T, tc *testController) *spy {
	s := &spy{msgs: map[string][]string{}}
	ready := make(chan struct{})
	var once sync.Once
	client, err := mqttclient.New(mqttclient.Options{
		BrokerURL: tc.brokerURL(), ClientID: "spy", Username: credential.ControllerUsername,
		Password:      credential.ControllerToken(tc.secret),
		Subscriptions: []mqttclient.Subscription{{Filter: "#", QoS: 1}},
		Handler: func(topic string, payload []byte) {
			s.mu.Lock()
			s.msgs[topic] = append(s.msgs[topic], string(payload))
			s.mu.Unlock()
		},
		OnConnect:          func(context.Context) { once.Do(func() { close(ready) }) },
		FirstConnectJitter: time.Millisecond,
		NoCoalesce:         func(string) bool { return true },
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- client.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case <-time.After(wait):
		t.Fatal("spy did not connect")
	}
	return s
}

// topicsWith lists the topics on which a payload contained s.
func (s *spy) topicsWith(str string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for topic, payloads := range s.msgs {
		for _, p := range payloads {
			if strings.Contains(p, str) {
				out = append(out, topic)
				break
			}
		}
	}
	return out
}

func (s *spy) last(topic string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.msgs[topic]
	if len(p) == 0 {
		return "", false
	}
	return p[len(p)-1], true
}

// expectDesired waits until the node's last desired state satisfies fn.
func (n *fakeNode) expectDesired(fn func(schema.DesiredState) error) schema.DesiredState {
	n.t.Helper()
	var d schema.DesiredState
	checkfor.Eventually(n.t, wait, 20*time.Millisecond, func() error {
		var ok bool
		if d, ok = n.lastDesired(); !ok {
			return fmt.Errorf("node %s: no desired state", n.name)
		}
		return fn(d)
	})
	return d
}

func refsNamed(refs []schema.ObjectRef) string {
	var names []string
	for _, r := range refs {
		names = append(names, r.Namespace+"/"+r.Name)
	}
	return strings.Join(names, ",")
}

// registerKey makes node a sealing key and registers it the way an agent
// does: PUT /api/v1/node/key over HTTP, authenticated with the node's
// token.
func registerKey(t *testing.T, tc *testController, node string) sealing.Keyring {
	t.Helper()
	k, err := sealing.GenerateKey()
	require.NoError(t, err)
	nc := api.NewNodeClient("http://"+tc.APIAddr().String(), node, credential.NodeToken(tc.secret, node), nil)
	got, challenge, err := nc.RegisterNodeKey(context.Background(), api.NodeKeyRequest{PublicKey: k.Public().String()})
	require.NoError(t, err)
	require.Nil(t, challenge, "a node's first key needs no proof")
	require.Equal(t, k.KeyID(), got.KeyID)
	return sealing.Keyring{Current: k}
}

// openSealed opens a sealed secret payload with ring as node's Secret.
func openSealed(node, hash string, payload []byte, ring sealing.Keyring) (schema.SecretMessage, error) {
	sm, err := schema.DecodeSealedSecretMessage(payload)
	if err != nil {
		return schema.SecretMessage{}, err
	}
	plain, err := ring.OpenSecret(node, hash, sm.Sealed)
	if err != nil {
		return schema.SecretMessage{}, err
	}
	return schema.DecodeSecretMessage(plain)
}

// TestSecretTravelsOnlyToItsNode is the broker sniffer: a client reading
// every topic with the controller's identity (what a broker operator
// sees) finds the secret's value nowhere, in the clear or in base64: not
// on the secret topic of the one node that runs a daemon referencing it
// (there it is sealed to that node's key, and opens with it only), not on
// revision or ConfigMap topics, not in events or logs. Another node's key
// does not open it. A ConfigMap change changes exactly the desired state
// of that node.
func TestSecretTravelsOnlyToItsNode(t *testing.T) {
	var logs syncBuffer
	tc := startControllerLogging(t, Config{}, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	s := startSpy(t, tc)
	a := startNode(t, tc.brokerURL(), tc.secret, gateway("node-a", nil))
	b := startNode(t, tc.brokerURL(), tc.secret, schema.NodeStatus{Node: "node-b", Labels: map[string]string{"role": "sensor"},
		Conditions: []schema.NodeCondition{{Type: schema.NodeReady, Status: schema.ConditionTrue}}})
	b.expectDesired(func(schema.DesiredState) error { return nil })
	aKeys, bKeys := registerKey(t, tc, "node-a"), registerKey(t, tc, "node-b")

	res := tc.apply(t, configMapObj("edge", "agent-config", map[string]string{"agent.yaml": "level: info"}),
		secretObj("edge", "api-key", map[string]string{"token": secretValue}), agentDS(false))
	assert.Equal(t, []api.ApplyAction{api.ActionCreated, api.ActionCreated, api.ActionCreated},
		[]api.ApplyAction{res[0].Action, res[1].Action, res[2].Action})

	first := a.expectDesired(func(d schema.DesiredState) error {
		if refsNamed(d.ConfigMaps) != "edge/agent-config" || refsNamed(d.Secrets) != "edge/api-key" {
			return fmt.Errorf("desired configMaps %v secrets %v", d.ConfigMaps, d.Secrets)
		}
		return nil
	})
	secretTopic := schema.NodeSecretTopic("node-a", first.Secrets[0].Hash)
	cmTopic := schema.ConfigMapTopic(first.ConfigMaps[0].Hash)
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if _, ok := s.last(secretTopic); !ok {
			return fmt.Errorf("nothing on %s", secretTopic)
		}
		if _, ok := s.last(cmTopic); !ok {
			return fmt.Errorf("nothing on %s", cmTopic)
		}
		return nil
	})
	checkMessages(t, s, secretTopic, cmTopic, first, aKeys)
	p, _ := s.last(secretTopic)
	_, err := openSealed("node-a", first.Secrets[0].Hash, []byte(p), bKeys)
	require.ErrorIs(t, err, sealing.ErrNotForKey, "another node's key does not open it")
	bGen := b.expectDesired(func(d schema.DesiredState) error { return nil }).Generation

	// A ConfigMap change: node-a's desired state gets the new hash, the old
	// topic is cleared, node-b (which references nothing) is untouched.
	tc.apply(t, configMapObj("edge", "agent-config", map[string]string{"agent.yaml": "level: debug"}))
	second := a.expectDesired(func(d schema.DesiredState) error {
		if len(d.ConfigMaps) != 1 || d.ConfigMaps[0].Hash == first.ConfigMaps[0].Hash {
			return fmt.Errorf("desired configMaps %v, want a new hash", d.ConfigMaps)
		}
		return nil
	})
	assert.Equal(t, first.Generation+1, second.Generation)
	assert.Equal(t, first.Instances, second.Instances, "without rollOnConfigChange the revision stays")
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if p, _ := s.last(cmTopic); p != "" {
			return fmt.Errorf("old ConfigMap topic %s not cleared", cmTopic)
		}
		return nil
	})
	last, _ := b.lastDesired()
	assert.Equal(t, bGen, last.Generation, "node-b references nothing and keeps its generation")

	events, err := tc.api.Events(context.Background(), api.EventFilter{})
	require.NoError(t, err)
	for _, e := range events {
		assert.NotContains(t, e.Message, secretValue)
	}
	assert.Empty(t, s.topicsWith(secretValue), "the sniffer sees no plaintext of the secret")
	assert.Empty(t, s.topicsWith(base64.StdEncoding.EncodeToString([]byte(secretValue))),
		"nor its base64: on node-a's topic it travels sealed")

	assert.NotContains(t, logs.String(), secretValue, "the controller never logs a secret's value")
	assert.NotContains(t, logs.String(), base64.StdEncoding.EncodeToString([]byte(secretValue)))
	assert.Contains(t, logs.String(), "level=", "the controller logged")

	// Deleting the secret drops it from the desired state and clears its topic.
	require.NoError(t, tc.api.DeleteSecret(context.Background(), "edge/api-key"))
	a.expectDesired(func(d schema.DesiredState) error {
		if len(d.Secrets) != 0 {
			return fmt.Errorf("secrets %v after delete", d.Secrets)
		}
		return nil
	})
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if p, _ := s.last(secretTopic); p != "" {
			return fmt.Errorf("secret topic %s not cleared", secretTopic)
		}
		return nil
	})
}

// checkMessages verifies the config messages: the secret is sealed to
// node-a's key and opens with ring as the Secret the desired state
// names; hashes are the content addresses of what they carry, and only
// what a device needs travels.
func checkMessages(t *testing.T, s *spy, secretTopic, cmTopic string, d schema.DesiredState, ring sealing.Keyring) {
	t.Helper()
	p, _ := s.last(secretTopic)
	assert.True(t, schema.IsSealedSecret([]byte(p)), "the secret travels sealed")
	sm, err := openSealed("node-a", d.Secrets[0].Hash, []byte(p), ring)
	require.NoError(t, err)
	assert.Equal(t, "node-a", sm.Node)
	assert.Equal(t, d.Secrets[0].Hash, sm.Hash)
	assert.Equal(t, schema.SecretHash(sm.Secret), sm.Hash, "the hash is the content address of the secret sent")
	assert.Equal(t, secretValue, string(sm.Secret.Data["token"]))

	p, _ = s.last(cmTopic)
	var cm schema.ConfigMapMessage
	require.NoError(t, json.Unmarshal([]byte(p), &cm))
	assert.Equal(t, schema.ConfigMapHash(cm.ConfigMap), cm.Hash)
	assert.Equal(t, schema.ObjectMeta{Namespace: "edge", Name: "agent-config"}, cm.ConfigMap.Metadata)
	assert.Equal(t, "level: info", cm.ConfigMap.Data["agent.yaml"])
}

// TestRollOnConfigChange: with rollOnConfigChange a ConfigMap change is a
// new revision rolled out to the node; without it the revision stays (see
// TestSecretTravelsOnlyToItsNode).
func TestRollOnConfigChange(t *testing.T) {
	tc := startController(t, Config{})
	a := startNode(t, tc.brokerURL(), tc.secret, gateway("node-a", nil))
	a.behave = healthy()
	res := tc.apply(t, configMapObj("edge", "agent-config", map[string]string{"k": "1"}), agentDS(true))
	assert.Equal(t, int64(1), res[1].Revision)
	first := a.expectDesired(func(d schema.DesiredState) error {
		if len(d.Instances) != 1 || len(d.ConfigMaps) != 1 {
			return fmt.Errorf("desired %+v", d)
		}
		return nil
	})

	tc.apply(t, configMapObj("edge", "agent-config", map[string]string{"k": "2"}))
	second := a.expectDesired(func(d schema.DesiredState) error {
		if len(d.Instances) != 1 || d.Instances[0].Revision == first.Instances[0].Revision {
			return fmt.Errorf("instances %v, want a new revision", d.Instances)
		}
		return nil
	})
	rev, err := tc.store.GetRevision("edge/agent", second.Instances[0].Revision)
	require.NoError(t, err)
	assert.Equal(t, int64(2), rev.Number)
	assert.NotEmpty(t, rev.Template.Metadata.Annotations[ConfigHashAnnotation])
	assert.Contains(t, rev.ChangeCause, "configmap/agent-config")

	// A missing Secret counts as absent; creating it is a change too.
	tc.apply(t, secretObj("edge", "api-key", map[string]string{"token": secretValue}))
	third := a.expectDesired(func(d schema.DesiredState) error {
		if d.Instances[0].Revision == second.Instances[0].Revision || len(d.Secrets) != 1 {
			return fmt.Errorf("instances %v secrets %v", d.Instances, d.Secrets)
		}
		return nil
	})
	rev, err = tc.store.GetRevision("edge/agent", third.Instances[0].Revision)
	require.NoError(t, err)
	assert.NotContains(t, fmt.Sprint(rev.Template), secretValue)

	// Reapplying the same objects changes nothing.
	res = tc.apply(t, configMapObj("edge", "agent-config", map[string]string{"k": "2"}), agentDS(true))
	assert.Equal(t, api.ActionUnchanged, res[0].Action)
	assert.Equal(t, api.ActionUnchanged, res[1].Action)
	assert.Equal(t, int64(3), res[1].Revision)
}

// TestApplyConfigObjectsAllOrNothing: one request is one transaction; a
// request with an object over the limit applies nothing, and names it.
func TestApplyConfigObjectsAllOrNothing(t *testing.T) {
	tc := startController(t, Config{})
	big := strings.Repeat("x", deliveryLimit)
	_, err := tc.applyObjects([]schema.Object{
		configMapObj("edge", "agent-config", map[string]string{"k": "1"}),
		secretObj("edge", "api-key", map[string]string{"token": big}), agentDS(false),
	}, nil, applyRequest{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "secret/edge/api-key")
	assert.Contains(t, err.Error(), fmt.Sprint(deliveryLimit))
	assert.NotContains(t, err.Error(), "xxxx")

	cms, err := tc.api.ListConfigMaps(context.Background())
	require.NoError(t, err)
	assert.Empty(t, cms)
	dss, err := tc.api.ListDaemonSets(context.Background())
	require.NoError(t, err)
	assert.Empty(t, dss)

	// A dry run says what would happen and keeps nothing.
	res, err := tc.applyObjects([]schema.Object{configMapObj("edge", "agent-config", map[string]string{"k": "1"}), agentDS(false)},
		nil, applyRequest{dryRun: true})
	require.NoError(t, err)
	assert.Equal(t, api.ActionCreated, res[0].Action)
	assert.Equal(t, api.ActionCreated, res[1].Action)
	assert.Equal(t, int64(1), res[1].Revision)
	cms, err = tc.api.ListConfigMaps(context.Background())
	require.NoError(t, err)
	assert.Empty(t, cms, "a dry run keeps nothing")

	// A failure inside the transaction (a daemonset without a name) keeps
	// the ConfigMap applied before it out too.
	bad := agentDS(false)
	bad.DaemonSet.Metadata.Name = ""
	_, err = tc.applyObjects([]schema.Object{configMapObj("edge", "agent-config", nil), bad}, nil, applyRequest{})
	require.Error(t, err)
	cms, err = tc.api.ListConfigMaps(context.Background())
	require.NoError(t, err)
	assert.Empty(t, cms)
}

// TestConfigAPIHidesSecretValues: get and list show a Secret's keys and
// sizes; values only when asked.
func TestConfigAPIHidesSecretValues(t *testing.T) {
	tc := startController(t, Config{})
	tc.apply(t, secretObj("edge", "api-key", map[string]string{"token": secretValue}), agentDS(false),
		configMapObj("edge", "agent-config", map[string]string{"a.yaml": "x: 1"}))
	ctx := context.Background()
	s, err := tc.api.GetSecret(ctx, "edge/api-key", false)
	require.NoError(t, err)
	assert.Nil(t, s.Data)
	assert.Equal(t, []api.ConfigKey{{Key: "token", Size: len(secretValue)}}, s.Keys)
	assert.Equal(t, []string{"edge/agent"}, s.ReferencedBy)
	list, err := tc.api.ListSecrets(ctx, false)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Nil(t, list[0].Data)
	raw, err := json.Marshal(list)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), secretValue)
	assert.NotContains(t, string(raw), base64.StdEncoding.EncodeToString([]byte(secretValue)))

	s, err = tc.api.GetSecret(ctx, "edge/api-key", true)
	require.NoError(t, err)
	assert.Equal(t, secretValue, string(s.Data["token"]))

	cm, err := tc.api.GetConfigMap(ctx, "edge/agent-config")
	require.NoError(t, err)
	assert.Equal(t, "x: 1", cm.Data["a.yaml"])
	assert.Equal(t, []string{"edge/agent"}, cm.ReferencedBy)

	_, err = tc.api.GetSecret(ctx, "edge/none", false)
	assert.ErrorIs(t, err, api.ErrNotFound)
	require.NoError(t, tc.api.DeleteConfigMap(ctx, "edge/agent-config"))
	err = tc.api.DeleteConfigMap(ctx, "edge/agent-config")
	assert.ErrorIs(t, err, api.ErrNotFound)
	assert.EqualError(t, err, "configmap edge/agent-config: not found") // not the store's file and transaction
	err = tc.api.DeleteSecret(ctx, "edge/none")
	assert.ErrorIs(t, err, api.ErrNotFound)
	assert.EqualError(t, err, "secret edge/none: not found")
}

// TestConfigObjectsSurviveRestart: a restarted controller whose broker
// lost every retained message republishes the config topics with the
// desired states.
func TestConfigObjectsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	tc := startController(t, Config{DataDir: dir})
	a := startNode(t, tc.brokerURL(), tc.secret, gateway("node-a", nil))
	registerKey(t, tc, "node-a") // kept in the store across the restart
	tc.apply(t, configMapObj("edge", "agent-config", map[string]string{"k": "1"}),
		secretObj("edge", "api-key", map[string]string{"token": secretValue}), agentDS(false))
	before := a.expectDesired(func(d schema.DesiredState) error {
		if len(d.Secrets) != 1 {
			return fmt.Errorf("secrets %v", d.Secrets)
		}
		return nil
	})
	a.stop()
	tc.stop()
	require.NoError(t, removeBrokerState(dir))

	tc2 := startController(t, Config{DataDir: dir})
	s := startSpy(t, tc2)
	secretTopic := schema.NodeSecretTopic("node-a", before.Secrets[0].Hash)
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		if p, _ := s.last(secretTopic); !strings.Contains(p, `"hash":"`+before.Secrets[0].Hash) {
			return fmt.Errorf("secret topic %s not republished", secretTopic)
		}
		if _, ok := s.last(schema.ConfigMapTopic(before.ConfigMaps[0].Hash)); !ok {
			return fmt.Errorf("configmap topic not republished")
		}
		return nil
	})
	cms, err := tc2.api.ListConfigMaps(context.Background())
	require.NoError(t, err)
	assert.Len(t, cms, 1)
}

func TestEffectiveTemplate(t *testing.T) {
	versions := map[string]string{"configmap/edge/agent-config": "h1", "secret/edge/api-key": "1.1"}
	lookup := func(v map[string]string) configVersions {
		return func(kind, key string) string { return v[kind+key] }
	}
	changed := map[string]string{"configmap/edge/agent-config": "h2", "secret/edge/api-key": "1.1"}
	noSecret := map[string]string{"configmap/edge/agent-config": "h1"}

	plain := agentDS(false).DaemonSet
	rolling := agentDS(true).DaemonSet
	stale := agentDS(false).DaemonSet
	stale.Spec.Template.Metadata.Annotations = map[string]string{ConfigHashAnnotation: "old", "keep": "me"}

	assert.Nil(t, effectiveTemplate(plain, lookup(versions)).Metadata.Annotations, "without rollOnConfigChange")
	assert.Equal(t, map[string]string{"keep": "me"}, effectiveTemplate(stale, lookup(versions)).Metadata.Annotations,
		"a copied config hash is dropped without rollOnConfigChange")
	assert.Equal(t, "old", stale.Spec.Template.Metadata.Annotations[ConfigHashAnnotation], "the daemonset is not modified")

	h := effectiveTemplate(rolling, lookup(versions)).Metadata.Annotations[ConfigHashAnnotation]
	assert.Len(t, h, 20)
	assert.Equal(t, h, effectiveTemplate(rolling, lookup(versions)).Metadata.Annotations[ConfigHashAnnotation], "deterministic")
	assert.NotEqual(t, h, effectiveTemplate(rolling, lookup(changed)).Metadata.Annotations[ConfigHashAnnotation])
	assert.NotEqual(t, h, effectiveTemplate(rolling, lookup(noSecret)).Metadata.Annotations[ConfigHashAnnotation], "absent differs")
	assert.Nil(t, rolling.Spec.Template.Metadata.Annotations)
}

// TestConfigTopicsFollowDesiredStates: the topics follow the desired
// states one node at a time; a ConfigMap topic stays while any node
// references it, a Secret topic is per node, and a topic that comes and
// goes between two takes is neither published nor cleared.
func TestConfigTopicsFollowDesiredStates(t *testing.T) {
	ref := func(name, hash string) []schema.ObjectRef {
		return []schema.ObjectRef{{Namespace: "edge", Name: name, Hash: hash}}
	}
	topics := newConfigTopics()
	topics.load("a", ref("cfg", "c1"), ref("key", "k1"))
	topics.load("b", ref("cfg", "c1"), ref("key", "k1"))
	assert.False(t, topics.pending(), "loaded topics are published already")

	topics.replace("a", ref("cfg", "c1"), ref("key", "k1"), ref("cfg", "c2"), ref("key", "k1"))
	topics.replace("b", ref("cfg", "c1"), ref("key", "k1"), ref("cfg", "c1"), nil)
	topics.replace("c", nil, nil, nil, ref("key", "k1"))
	add, remove := topics.take()
	assert.Equal(t, []topicChange{{hash: "c2", key: "edge/cfg"}, {node: "c", hash: "k1", key: "edge/key"}}, add)
	assert.Equal(t, []topicChange{{node: "b", hash: "k1", key: "edge/key"}}, remove,
		"c1 is still referenced by b; b no longer needs k1")
	assert.False(t, topics.pending())

	topics.replace("b", ref("cfg", "c1"), nil, nil, nil)
	add, remove = topics.take()
	assert.Empty(t, add)
	assert.Equal(t, []topicChange{{hash: "c1", key: "edge/cfg"}}, remove, "nothing references c1 any more")

	topics.replace("a", ref("cfg", "c2"), ref("key", "k1"), ref("cfg", "c3"), nil)
	topics.replace("a", ref("cfg", "c3"), nil, ref("cfg", "c2"), ref("key", "k1"))
	assert.False(t, topics.pending(), "back to what is published")
	assert.Equal(t, []topicChange{{hash: "c2", key: "edge/cfg"}, {node: "a", hash: "k1", key: "edge/key"}, {node: "c", hash: "k1", key: "edge/key"}},
		topics.all())
}

func TestCheckObjectsSizes(t *testing.T) {
	over := strings.Repeat("v", schema.MaxConfigSize)
	cases := []struct {
		name  string
		obj   schema.Object
		limit int
		want  string
	}{
		{"configmap over MaxConfigSize", configMapObj("edge", "big", map[string]string{"k": over}), 4 << 20,
			fmt.Sprintf("configmap/edge/big is %d bytes (keys and values), over the limit of %d bytes", schema.MaxConfigSize+1, schema.MaxConfigSize)},
		{"configmap message over the packet limit", configMapObj("edge", "big", map[string]string{"k": strings.Repeat("v", 2000)}), 1000,
			"configmap/edge/big is"},
		{"secret message over the packet limit", secretObj("edge", "key", map[string]string{"k": strings.Repeat("v", 2000)}), 1000,
			"secret/edge/key is"},
		{"daemonset revision over the packet limit", agentDS(false), 100, "daemonset edge/agent: its revision message is"},
		{"configmap without a name", configMapObj("edge", "", nil), 1000, "metadata.name: required"},
		{"fits", configMapObj("edge", "small", map[string]string{"k": "v"}), 1000, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkObjects([]schema.Object{tc.obj}, tc.limit)
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "test.yaml:1")
			assert.NotContains(t, err.Error(), "vvvv", "values never appear in errors")
		})
	}
}

// TestImmutableConfigObjects: as in Kubernetes, an immutable object's data
// cannot change and immutable cannot be unset; its metadata can.
func TestImmutableConfigObjects(t *testing.T) {
	tc := startController(t, Config{})
	yes := true
	cm := configMapObj("edge", "frozen", map[string]string{"k": "1"})
	cm.ConfigMap.Immutable = &yes
	sec := secretObj("edge", "frozen", map[string]string{"k": secretValue})
	sec.Secret.Immutable = &yes
	tc.apply(t, cm, sec)

	changed := configMapObj("edge", "frozen", map[string]string{"k": "2"})
	changed.ConfigMap.Immutable = &yes
	_, err := tc.applyObjects([]schema.Object{changed}, nil, applyRequest{})
	require.ErrorContains(t, err, "configmap/edge/frozen is immutable: its data cannot change")

	_, err = tc.applyObjects([]schema.Object{configMapObj("edge", "frozen", map[string]string{"k": "1"})}, nil, applyRequest{})
	require.ErrorContains(t, err, "immutable cannot be unset")

	changedSecret := secretObj("edge", "frozen", map[string]string{"k": "other"})
	changedSecret.Secret.Immutable = &yes
	_, err = tc.applyObjects([]schema.Object{changedSecret}, nil, applyRequest{})
	require.ErrorContains(t, err, "secret/edge/frozen is immutable")
	assert.NotContains(t, err.Error(), secretValue)

	labelled := configMapObj("edge", "frozen", map[string]string{"k": "1"})
	labelled.ConfigMap.Immutable, labelled.ConfigMap.Metadata.Labels = &yes, map[string]string{"a": "b"}
	res := tc.apply(t, labelled)
	assert.Equal(t, api.ActionConfigured, res[0].Action)
}

func TestRepairedByRepublish(t *testing.T) {
	for topic, want := range map[string]bool{
		schema.NodeTopic("n", schema.TopicDesired):     true,
		schema.ConfigMapTopic("abc"):                   true,
		schema.NodeSecretTopic("n", "abc"):             true,
		schema.NodeTopic("n", schema.TopicStatus):      false,
		schema.NodeTopic("n", schema.TopicLogsRequest): false,
		schema.RevisionTopic("abc"):                    false,
	} {
		assert.Equal(t, want, repairedByRepublish(topic), topic)
	}
}

// TestConfigObjectQuota: an API client cannot grow the config objects every
// agent keeps without end: creating one past MaxConfigObjects of its kind
// is refused with a reason naming it, and nothing of that request lands;
// updating a held object and creating one of the other kind still work.
func TestConfigObjectQuota(t *testing.T) {
	tc := startController(t, Config{})
	objs := make([]schema.Object, MaxConfigObjects)
	for i := range objs {
		objs[i] = configMapObj("edge", fmt.Sprintf("cm-%05d", i), map[string]string{"k": "v"})
	}
	tc.apply(t, objs...)

	_, err := tc.applyObjects([]schema.Object{
		secretObj("edge", "lands-not", map[string]string{"k": "v"}),
		configMapObj("edge", "one-too-many", map[string]string{"k": "v"}),
	}, nil, applyRequest{})
	require.ErrorIs(t, err, api.ErrInvalid)
	require.ErrorContains(t, err, "configmap/edge/one-too-many: the controller already holds 10000 ConfigMaps, its limit")
	_, err = tc.store.GetSecret("edge/lands-not")
	require.ErrorIs(t, err, store.ErrNotFound, "the refused request changed nothing")

	res := tc.apply(t, configMapObj("edge", "cm-00000", map[string]string{"k": "changed"}),
		secretObj("edge", "lands", map[string]string{"k": "v"}))
	assert.Equal(t, api.ActionConfigured, res[0].Action)
	assert.Equal(t, api.ActionCreated, res[1].Action)
}
