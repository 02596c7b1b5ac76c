package schema

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// wireCase is one wire message: its value, the golden file holding its
// encoding, and the decoder for its topic. One table drives encoding,
// decoding and the fuzz seed corpus.
type wireCase struct {
	name   string
	value  any
	decode func([]byte) (any, error)
}

// decoderFor adapts a typed decoder to wireCase.decode.
func decoderFor[T any](dec func([]byte) (T, error)) func([]byte) (any, error) {
	return func(b []byte) (any, error) { v, err := dec(b); return v, err }
}

var (
	t0 = time.Date(2025, 6, 1, 8, 0, 0, 0, time.UTC)
	t1 = time.Date(2025, 6, 1, 8, 5, 30, 0, time.UTC)
)

func sampleTemplate() PodTemplateSpec {
	return PodTemplateSpec{
		Metadata: ObjectMeta{Labels: map[string]string{"app": "agent"}},
		Spec: PodSpec{
			Containers: []Container{{
				Name: "agent", Image: "example.com/agent:1.0", ImagePullPolicy: PullIfNotPresent,
				Ports: []ContainerPort{{ContainerPort: 9100, HostPort: 9100, Protocol: ProtocolTCP}},
			}},
			RestartPolicy:                 RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr(int64(30)),
		},
	}
}

func sampleRevision() Revision {
	r := Revision{SchemaVersion: WireVersion, DaemonSet: "edge/agent", Number: 3, Template: sampleTemplate()}
	r.Hash = TemplateHash(r.Template)
	return r
}

// samplePinnedRevision is sampleRevision with its image pinned by the
// controller (schema.ImagePinsAnnotation).
func samplePinnedRevision() Revision {
	r := sampleRevision()
	r.Template = WithImagePins(r.Template, []ImagePin{{Image: "example.com/agent:1.0",
		Digest: "sha256:" + strings.Repeat("ab", 32), Config: "sha256:" + strings.Repeat("cd", 32)}})
	r.Hash = TemplateHash(r.Template)
	return r
}

func wireCases() []wireCase {
	hash := sampleRevision().Hash
	return []wireCase{
		{"node-status", NodeStatus{
			SchemaVersion: WireVersion, Node: "pi-01",
			Labels:     map[string]string{LabelArch: "arm64", LabelOS: "linux"},
			Taints:     []Taint{{Key: "edgeset.io/battery-low", Value: "true", Effect: TaintNoSchedule, TimeAdded: &t0}},
			Conditions: []NodeCondition{{Type: NodeReady, Status: ConditionTrue, Since: t0, Reason: "AgentReady"}},
			Addresses:  []NodeAddress{{Type: "InternalIP", Address: "10.0.0.5"}},
			Capacity:   ResourceList{"cpu": "4", "memory": "3982Mi"},
			Info:       NodeInfo{OS: "linux", Arch: "arm64", Hostname: "pi-01", AgentVersion: "v0.1.0", Runtime: "docker", RuntimeVersion: "24.0.7"},
		}, decoderFor(DecodeNodeStatus)},
		{"node-status-minimal", NodeStatus{SchemaVersion: WireVersion, Node: "pi-02"}, decoderFor(DecodeNodeStatus)},
		{"presence-online", Presence{SchemaVersion: WireVersion, Node: "pi-01", Online: true, Session: t0.UnixNano()}, decoderFor(DecodePresence)},
		{"presence-offline", Presence{SchemaVersion: WireVersion, Node: "pi-01", Online: false, Session: t0.UnixNano()}, decoderFor(DecodePresence)},
		{"desired-state", DesiredState{
			SchemaVersion: WireVersion, Node: "pi-01", Generation: 42,
			Instances: []DesiredInstance{{DaemonSet: "edge/agent", Revision: hash}, {DaemonSet: "kube-system/fluentd", Revision: "0123456789abcdef0123"}},
		}, decoderFor(DecodeDesiredState)},
		{"desired-state-empty", DesiredState{SchemaVersion: WireVersion, Node: "pi-01", Generation: 1, Instances: []DesiredInstance{}}, decoderFor(DecodeDesiredState)},
		{"observed-state", ObservedState{
			SchemaVersion: WireVersion, Node: "pi-01", ObservedGeneration: 42,
			Instances: []InstanceStatus{
				{DaemonSet: "edge/agent", Revision: hash, Phase: PhaseRunning, Ready: true, ReadySince: &t1, ContainerIDs: []string{"3f2a"}},
				{DaemonSet: "kube-system/fluentd", Revision: "0123456789abcdef0123", Phase: PhaseCrashLoopBackOff, Restarts: 7, LastExitCode: ptr(int32(137)), Message: "OOMKilled"},
			},
		}, decoderFor(DecodeObservedState)},
		{"node-event", NodeEvent{
			SchemaVersion: WireVersion, Node: "pi-01", Time: t1, Type: EventWarning, Reason: "ErrImagePull",
			DaemonSet: "edge/agent", Message: "pull example.com/agent:1.0: connection refused",
		}, decoderFor(DecodeNodeEvent)},
		{"revision", sampleRevision(), decoderFor(DecodeRevision)},
		{"revision-pinned", samplePinnedRevision(), decoderFor(DecodeRevision)},
		{"desired-state-config", DesiredState{
			SchemaVersion: WireVersion, Node: "pi-01", Generation: 43,
			Instances:  []DesiredInstance{{DaemonSet: "edge/agent", Revision: hash}},
			ConfigMaps: []ObjectRef{{Namespace: "edge", Name: "agent-config", Hash: ConfigMapHash(sampleConfigMap())}},
			Secrets:    []ObjectRef{{Namespace: "edge", Name: "agent-token", Hash: SecretHash(sampleSecret())}},
		}, decoderFor(DecodeDesiredState)},
		{"observed-state-init", ObservedState{
			SchemaVersion: WireVersion, Node: "pi-01", ObservedGeneration: 43,
			Instances: []InstanceStatus{{DaemonSet: "edge/agent", Revision: hash, Phase: PhaseInitCrashLoopBackOff, Restarts: 2, LastExitCode: ptr(int32(1)), Message: "init container setup: exit code 1"}},
		}, decoderFor(DecodeObservedState)},
		{"desired-state-prefetch", DesiredState{
			SchemaVersion: WireVersion, Node: "pi-01", Generation: 44,
			Instances: []DesiredInstance{{DaemonSet: "edge/agent", Revision: "0123456789abcdef0123"}},
			Prefetch:  []DesiredInstance{{DaemonSet: "edge/agent", Revision: hash}},
		}, decoderFor(DecodeDesiredState)},
		{"observed-state-prefetch", ObservedState{
			SchemaVersion: WireVersion, Node: "pi-01", ObservedGeneration: 44,
			Instances: []InstanceStatus{{DaemonSet: "edge/agent", Revision: "0123456789abcdef0123", Phase: PhaseRunning, Ready: true, ReadySince: &t1}},
			Prefetch:  []PrefetchStatus{{DaemonSet: "edge/agent", Revision: hash, BytesDone: 812 << 10, BytesTotal: 1000 << 10}},
		}, decoderFor(DecodeObservedState)},
		{"desired-state-lock-override", DesiredState{
			SchemaVersion: WireVersion, Node: "pi-01", Generation: 44,
			Instances: []DesiredInstance{{DaemonSet: "edge/agent", Revision: hash, OverrideUpdateLock: FormatLockInstant(t0)}},
		}, decoderFor(DecodeDesiredState)},
		{"observed-state-lock", ObservedState{
			SchemaVersion: WireVersion, Node: "pi-01", ObservedGeneration: 44,
			Instances: []InstanceStatus{
				{DaemonSet: "edge/agent", Revision: "0123456789abcdef0123", Phase: PhaseRunning, Ready: true, ReadySince: &t1,
					UpdateLock: &UpdateLockStatus{HeldSince: t0, Deferred: true}},
				{DaemonSet: "edge/agent", Revision: hash, Phase: PhasePending, Message: "update deferred: the instance of revision 0123456789 holds its update lock (since 2025-06-01T08:00:00Z)"},
			},
		}, decoderFor(DecodeObservedState)},
		{"configmap", ConfigMapMessage{SchemaVersion: WireVersion, Hash: ConfigMapHash(sampleConfigMap()), ConfigMap: sampleConfigMap()}, decoderFor(DecodeConfigMapMessage)},
		{"secret", SecretMessage{SchemaVersion: WireVersion, Node: "pi-01", Hash: SecretHash(sampleSecret()), Secret: sampleSecret()}, decoderFor(DecodeSecretMessage)},
		{"sealed-secret", sampleSealedSecret(), decoderFor(DecodeSealedSecretMessage)},
	}
}

func sampleConfigMap() ConfigMap {
	return ConfigMap{
		TypeMeta:   TypeMeta{APIVersion: APIVersionCore, Kind: KindConfigMap},
		Metadata:   ObjectMeta{Name: "agent-config", Namespace: "edge"},
		Data:       map[string]string{"agent.conf": "level = info\n"},
		BinaryData: map[string][]byte{"logo.png": {0x89, 'P', 'N', 'G'}},
	}
}

func sampleSecret() Secret {
	return Secret{
		TypeMeta: TypeMeta{APIVersion: APIVersionCore, Kind: KindSecret},
		Metadata: ObjectMeta{Name: "agent-token", Namespace: "edge"},
		Type:     SecretTypeOpaque,
		Data:     map[string][]byte{"token": []byte("s3cr3t")},
	}
}

func goldenPath(name string) string { return filepath.Join("testdata", "wire", name+".json") }

func TestWireGolden(t *testing.T) {
	for _, tc := range wireCases() {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Encode(tc.value)
			require.NoError(t, err)
			got = append(got, '\n')
			if *update {
				require.NoError(t, os.WriteFile(goldenPath(tc.name), got, 0o644))
			}
			want, err := os.ReadFile(goldenPath(tc.name))
			require.NoError(t, err, "run go test -update to create the golden file")
			assert.Equal(t, string(want), string(got), "encoding")

			decoded, err := tc.decode(want)
			require.NoError(t, err)
			assert.Equal(t, tc.value, decoded, "decoding the golden file")
		})
	}
}

// configMapJSON encodes the sample ConfigMap message changed by mut.
func configMapJSON(mut func(*ConfigMapMessage)) []byte {
	cm := sampleConfigMap()
	m := ConfigMapMessage{SchemaVersion: WireVersion, Hash: ConfigMapHash(cm), ConfigMap: cm}
	mut(&m)
	b, _ := Encode(m)
	return b
}

// secretJSON encodes the sample Secret message changed by mut.
func secretJSON(mut func(*SecretMessage)) []byte {
	s := sampleSecret()
	m := SecretMessage{SchemaVersion: WireVersion, Node: "pi-01", Hash: SecretHash(s), Secret: s}
	mut(&m)
	b, _ := Encode(m)
	return b
}

func TestWireDecodeRejects(t *testing.T) {
	status := func(mut func(string) string) []byte {
		b, _ := os.ReadFile(goldenPath("node-status"))
		return []byte(mut(string(b)))
	}
	rev := sampleRevision()
	tampered := rev
	tampered.Template.Spec.Containers = []Container{{Name: "agent", Image: "evil.example.com/agent:1.0"}}
	tamperedJSON, _ := Encode(tampered)
	badTemplate := rev
	badTemplate.Template.Spec.Containers = nil
	badTemplate.Hash = TemplateHash(badTemplate.Template)
	badTemplateJSON, _ := Encode(badTemplate)
	badPins := sampleRevision()
	badPins.Template.Metadata.Annotations = map[string]string{ImagePinsAnnotation: `[{"image":"evil/miner:1","digest":"sha256:00"}]`}
	badPins.Hash = TemplateHash(badPins.Template)
	badPinsJSON, _ := Encode(badPins)
	swapped := samplePinnedRevision()
	swapped.Template = WithImagePins(swapped.Template, []ImagePin{{Image: "example.com/agent:1.0", Digest: "sha256:" + strings.Repeat("ee", 32)}})
	swappedJSON, _ := Encode(swapped) // the pin swapped, the hash kept

	tests := []struct {
		name   string
		decode func([]byte) (any, error)
		in     []byte
		want   string
		is     error
	}{
		{"empty", decoderFor(DecodePresence), nil, "empty message", nil},
		{"truncated", decoderFor(DecodePresence), []byte(`{"schemaVersion":1`), "unexpected EOF", nil},
		{"not JSON", decoderFor(DecodePresence), []byte("online"), "invalid JSON at offset 1", nil},
		{"array", decoderFor(DecodePresence), []byte(`[]`), "cannot unmarshal array", nil},
		{"trailing data", decoderFor(DecodePresence), []byte(`{"schemaVersion":1,"node":"a","online":true,"session":1} {}`), "trailing data", nil},
		{"unknown field", decoderFor(DecodePresence), []byte(`{"schemaVersion":1,"node":"a","online":true,"session":1,"battery":3}`), `unknown field "battery"`, nil},
		{"wrong schema version", decoderFor(DecodePresence), []byte(`{"schemaVersion":2,"node":"a","online":true,"session":1}`), "schemaVersion: unsupported schemaVersion 2: want 1", nil},
		{"missing node", decoderFor(DecodePresence), []byte(`{"schemaVersion":1,"online":true,"session":1}`), "node: required", nil},
		{"node with topic wildcard", decoderFor(DecodePresence), []byte(`{"schemaVersion":1,"node":"a/+","online":true,"session":1}`), `invalid node name "a/+"`, nil},
		{"no session", decoderFor(DecodePresence), []byte(`{"schemaVersion":1,"node":"a","online":true}`), "session: must be > 0", nil},
		{"wrong type", decoderFor(DecodePresence), []byte(`{"schemaVersion":"1","node":"a"}`), "schemaVersion: must be int, not a JSON string", nil},
		{"oversize", decoderFor(DecodeNodeStatus), append([]byte(`{"node":"`), bytes.Repeat([]byte("a"), MaxMessageSize)...), "message too large", ErrMessageTooLarge},
		{"bad taint effect", decoderFor(DecodeNodeStatus), status(func(s string) string { return strings.Replace(s, `"NoSchedule"`, `"Evict"`, 1) }), `taints[0].effect: unsupported effect "Evict"`, nil},
		{"bad condition status", decoderFor(DecodeNodeStatus), status(func(s string) string { return strings.Replace(s, `"status":"True"`, `"status":"Yes"`, 1) }), `conditions[0].status: unsupported status "Yes"`, nil},
		{"bad capacity", decoderFor(DecodeNodeStatus), status(func(s string) string { return strings.Replace(s, `"4"`, `"four"`, 1) }), `capacity[cpu]: quantity "four"`, nil},
		{"bad daemonset key", decoderFor(DecodeDesiredState), []byte(`{"schemaVersion":1,"node":"a","generation":1,"instances":[{"daemonSet":"agent","revision":"0123456789abcdef0123"}]}`), `instances[0].daemonSet: invalid daemonset key "agent"`, nil},
		{"bad revision hash", decoderFor(DecodeDesiredState), []byte(`{"schemaVersion":1,"node":"a","generation":1,"instances":[{"daemonSet":"a/b","revision":"XYZ"}]}`), `instances[0].revision: invalid revision hash "XYZ"`, nil},
		{"negative generation", decoderFor(DecodeDesiredState), []byte(`{"schemaVersion":1,"node":"a","generation":-1,"instances":[]}`), "generation: must be uint64", nil},
		{"bad phase", decoderFor(DecodeObservedState), []byte(`{"schemaVersion":1,"node":"a","observedGeneration":1,"instances":[{"daemonSet":"a/b","revision":"0123456789abcdef0123","phase":"Sleeping","ready":false,"restarts":0}]}`), `instances[0].phase: unsupported phase "Sleeping"`, nil},
		{"lock without heldSince", decoderFor(DecodeObservedState), []byte(`{"schemaVersion":1,"node":"a","observedGeneration":1,"instances":[{"daemonSet":"a/b","revision":"0123456789abcdef0123","phase":"Running","ready":true,"restarts":0,"updateLock":{"deferred":true}}]}`), `instances[0].updateLock.heldSince: required`, nil},
		{"bad lock override", decoderFor(DecodeDesiredState), []byte(`{"schemaVersion":1,"node":"a","generation":1,"instances":[{"daemonSet":"a/b","revision":"0123456789abcdef0123","overrideUpdateLock":"yesterday"}]}`), `instances[0].overrideUpdateLock: invalid instant "yesterday"`, nil},
		{"event without time", decoderFor(DecodeNodeEvent), []byte(`{"schemaVersion":1,"node":"a","time":"0001-01-01T00:00:00Z","type":"Normal","reason":"Started"}`), "time: required", nil},
		{"event bad type", decoderFor(DecodeNodeEvent), []byte(`{"schemaVersion":1,"node":"a","time":"2025-01-01T00:00:00Z","type":"Error","reason":"X"}`), `type: unsupported type "Error"`, nil},
		{"revision hash mismatch", decoderFor(DecodeRevision), tamperedJSON, "revision hash does not match template", ErrHashMismatch},
		{"revision with invalid template", decoderFor(DecodeRevision), badTemplateJSON, "template.spec.containers: required: at least one container", nil},
		{"revision with bad image pins", decoderFor(DecodeRevision), badPinsJSON, `template.metadata.annotations[edgeset.io/image-pins][0].image: "evil/miner:1" is not the image of any container`, nil},
		{"revision with a swapped image pin", decoderFor(DecodeRevision), swappedJSON, "revision hash does not match template", ErrHashMismatch},
		{"bad config ref", decoderFor(DecodeDesiredState), []byte(`{"schemaVersion":1,"node":"a","generation":1,"instances":[],"secrets":[{"namespace":"edge","name":"Tok","hash":"0123456789abcdef0123"}]}`), `secrets[0].name: invalid name "Tok"`, nil},
		{"configmap hash mismatch", decoderFor(DecodeConfigMapMessage), configMapJSON(func(m *ConfigMapMessage) { m.ConfigMap.Data["agent.conf"] = "level = debug" }), "config object hash does not match", ErrConfigHashMismatch},
		{"configmap with bad key", decoderFor(DecodeConfigMapMessage), configMapJSON(func(m *ConfigMapMessage) { m.ConfigMap.Data["../x"] = "" }), `configMap.data[../x]: invalid key`, nil},
		{"secret with stringData", decoderFor(DecodeSecretMessage), secretJSON(func(m *SecretMessage) { m.Secret.StringData = map[string]string{"a": "b"} }), "secret.stringData: must be empty", nil},
		{"secret without node", decoderFor(DecodeSecretMessage), secretJSON(func(m *SecretMessage) { m.Node = "" }), "node: required", nil},
		{"secret hash mismatch", decoderFor(DecodeSecretMessage), secretJSON(func(m *SecretMessage) { m.Secret.Data["token"] = []byte("other") }), "config object hash does not match", ErrConfigHashMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.decode(tc.in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			if tc.is != nil {
				assert.True(t, errors.Is(err, tc.is), "errors.Is(%v, %v)", err, tc.is)
			}
		})
	}
}
