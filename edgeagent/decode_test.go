package edgeagent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

func TestDecodeDesiredState(t *testing.T) {
	tests := []struct {
		name, payload, wantErr string
	}{
		{"valid", `{"schemaVersion":1,"node":"n","generation":2,"instances":[{"daemonSet":"a/x","revision":"0123456789abcdef0123"}]}`, ""},
		{"not json", `{`, "decode desired state"},
		{"other version", `{"schemaVersion":2,"node":"n","generation":2,"instances":[]}`, "schemaVersion"},
		{"missing revision", `{"schemaVersion":1,"node":"n","instances":[{"daemonSet":"a/x"}]}`, "instances[0].revision"},
		{"duplicate", `{"schemaVersion":1,"node":"n","instances":[{"daemonSet":"a/x","revision":"0123456789abcdef0123"},{"daemonSet":"a/x","revision":"0123456789abcdef0123"}]}`, "instances[1]: duplicate a/x"},
		{"config refs", `{"schemaVersion":1,"node":"n","instances":[],"configMaps":[{"namespace":"a","name":"c","hash":"0123456789abcdef0123"}],"secrets":[{"namespace":"a","name":"s","hash":"abcdefabcdefabcdef01"}]}`, ""},
		{"wildcard configmap hash", `{"schemaVersion":1,"node":"n","instances":[],"configMaps":[{"namespace":"a","name":"c","hash":"#"}]}`, `configMaps[0].hash: invalid content hash "#"`},
		{"secret without name", `{"schemaVersion":1,"node":"n","instances":[],"secrets":[{"namespace":"a","hash":"0123456789abcdef0123"}]}`, "secrets[0].name: invalid name \"\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeDesiredState([]byte(tc.payload))
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestDecodeRevision(t *testing.T) {
	good := stateRevision("a/x", "img:1")
	b, err := json.Marshal(good)
	require.NoError(t, err)
	got, err := decodeRevision(b)
	require.NoError(t, err)
	assert.Equal(t, good.Hash, got.Hash)

	forged := good
	forged.Template.Spec.Containers[0].Image = "evil:1"
	b, err = json.Marshal(forged)
	require.NoError(t, err)
	_, err = decodeRevision(b)
	assert.ErrorIs(t, err, schema.ErrHashMismatch)

	old := good
	old.SchemaVersion = 0
	b, err = json.Marshal(old)
	require.NoError(t, err)
	_, err = decodeRevision(b)
	assert.ErrorContains(t, err, "schemaVersion")
}

func FuzzDecodeDesiredState(f *testing.F) {
	f.Add([]byte(`{"schemaVersion":1,"node":"n","generation":2,"instances":[{"daemonSet":"a/x","revision":"0123456789abcdef0123"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ds, err := decodeDesiredState(b)
		if err != nil {
			return
		}
		if ds.SchemaVersion != schema.WireVersion {
			t.Fatalf("accepted schemaVersion %d", ds.SchemaVersion)
		}
		for _, in := range ds.Instances {
			if in.DaemonSet == "" || in.Revision == "" {
				t.Fatalf("accepted incomplete instance %+v", in)
			}
		}
	})
}
