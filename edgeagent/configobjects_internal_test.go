package edgeagent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

func objConfigMap(v string) schema.ConfigMap {
	return schema.ConfigMap{TypeMeta: schema.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, Metadata: schema.ObjectMeta{Name: "cfg", Namespace: "a"}, Data: map[string]string{"k": v}}
}

func objSecret(v string) schema.Secret {
	return schema.Secret{TypeMeta: schema.TypeMeta{APIVersion: "v1", Kind: "Secret"}, Metadata: schema.ObjectMeta{Name: "s", Namespace: "a"}, Data: map[string][]byte{"k": []byte(v)}}
}

func TestConfigObjectsPersistAndDropUnreferenced(t *testing.T) {
	for name, open := range testStores(t) {
		t.Run(name, func(t *testing.T) {
			s := open()
			cm1, cm2, sec := objConfigMap("1"), objConfigMap("2"), objSecret("x")
			h1, h2, hs := schema.ConfigMapHash(cm1), schema.ConfigMapHash(cm2), schema.SecretHash(sec)
			require.NoError(t, s.saveDesired(schema.DesiredState{SchemaVersion: 1, Node: "n", Generation: 1,
				ConfigMaps: []schema.ObjectRef{{Namespace: "a", Name: "cfg", Hash: h1}}, Secrets: []schema.ObjectRef{{Namespace: "a", Name: "s", Hash: hs}}}))
			require.NoError(t, s.saveConfigMap(h1, cm1))
			sealed := json.RawMessage(`{"schemaVersion":1,"sealed":{}}`)
			require.NoError(t, s.saveSecret(hs, sealed))
			st, err := s.load()
			require.NoError(t, err)
			assert.Equal(t, map[string]schema.ConfigMap{h1: cm1}, st.configMaps)
			assert.Equal(t, map[string]json.RawMessage{hs: sealed}, st.secrets)

			// The next version replaces the ConfigMap; the Secret is no longer referenced.
			require.NoError(t, s.saveDesired(schema.DesiredState{SchemaVersion: 1, Node: "n", Generation: 2,
				ConfigMaps: []schema.ObjectRef{{Namespace: "a", Name: "cfg", Hash: h2}}}))
			require.NoError(t, s.saveConfigMap(h2, cm2))
			st, err = s.load()
			require.NoError(t, err)
			assert.Equal(t, map[string]schema.ConfigMap{h2: cm2}, st.configMaps)
			assert.Empty(t, st.secrets)
			require.NoError(t, s.close())
		})
	}
}

func TestRestoreDropsCorruptConfigObjects(t *testing.T) {
	good, bad, sec := objConfigMap("1"), objConfigMap("2"), objSecret("x")
	hg, hb, hs := schema.ConfigMapHash(good), schema.ConfigMapHash(bad), schema.SecretHash(sec)
	bad.Data["k"] = "tampered"
	tamperedSecret := objSecret("tampered")
	ds := schema.DesiredState{SchemaVersion: 1, Node: "n", Generation: 1,
		ConfigMaps: []schema.ObjectRef{{Namespace: "a", Name: "cfg", Hash: hg}, {Namespace: "a", Name: "other", Hash: hb}},
		Secrets:    []schema.ObjectRef{{Namespace: "a", Name: "s", Hash: hs}}}
	a, err := New(Config{NodeName: "n", Ephemeral: true}, nil, nil)
	require.NoError(t, err)
	st := newLocalState()
	st.desired = &ds
	st.configMaps[hg], st.configMaps[hb], st.secrets[hs] = good, bad, marshal(t, tamperedSecret)
	a.restore(st)
	assert.Contains(t, a.configMaps, hg)
	assert.NotContains(t, a.configMaps, hb)
	assert.Empty(t, a.secrets)
	assert.Equal(t, map[string]bool{schema.ConfigMapTopic(hb): true, schema.NodeSecretTopic("n", hs): true}, a.missing, "fetched again")
}

func TestCheckConfigMessages(t *testing.T) {
	cm, sec := objConfigMap("1"), objSecret("x")
	hc, hs := schema.ConfigMapHash(cm), schema.SecretHash(sec)
	cmMsg := func(mod func(*schema.ConfigMapMessage)) schema.ConfigMapMessage {
		m := schema.ConfigMapMessage{SchemaVersion: schema.WireVersion, Hash: hc, ConfigMap: cm}
		if mod != nil {
			mod(&m)
		}
		return m
	}
	secMsg := func(mod func(*schema.SecretMessage)) schema.SecretMessage {
		m := schema.SecretMessage{SchemaVersion: schema.WireVersion, Node: "n", Hash: hs, Secret: sec}
		if mod != nil {
			mod(&m)
		}
		return m
	}
	t.Run("configmaps", func(t *testing.T) {
		tests := []struct {
			name string
			msg  schema.ConfigMapMessage
			want string
		}{
			{"valid", cmMsg(nil), ""},
			{"schema version", cmMsg(func(m *schema.ConfigMapMessage) { m.SchemaVersion = 9 }), "schemaVersion"},
			{"hash not its content", cmMsg(func(m *schema.ConfigMapMessage) { m.Hash = "00000000000000000000" }), "does not match its content"},
			{"another topic's", cmMsg(func(m *schema.ConfigMapMessage) {
				m.ConfigMap = objConfigMap("other")
				m.Hash = schema.ConfigMapHash(m.ConfigMap)
			}), "hash: message carries"},
			{"content", cmMsg(func(m *schema.ConfigMapMessage) { m.ConfigMap = objConfigMap("2") }), "configmap hashes to"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, err := receiveConfigMap(hc, marshal(t, tc.msg))
				if tc.want == "" {
					require.NoError(t, err)
					return
				}
				require.ErrorContains(t, err, tc.want)
			})
		}
	})
	t.Run("secrets", func(t *testing.T) {
		tests := []struct {
			name string
			msg  schema.SecretMessage
			want string
		}{
			{"valid", secMsg(nil), ""},
			{"another node's", secMsg(func(m *schema.SecretMessage) { m.Node = "m" }), `node: secret is for "m"`},
			{"hash not its content", secMsg(func(m *schema.SecretMessage) { m.Hash = "00000000000000000000" }), "does not match its content"},
			{"another topic's", secMsg(func(m *schema.SecretMessage) {
				m.Secret = objSecret("other")
				m.Hash = schema.SecretHash(m.Secret)
			}), "hash: message carries"},
			{"content", secMsg(func(m *schema.SecretMessage) { m.Secret = objSecret("y") }), "secret hashes to"},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				_, err := receiveSecret("n", hs, marshal(t, tc.msg))
				if tc.want == "" {
					require.NoError(t, err)
					return
				}
				require.ErrorContains(t, err, tc.want)
				assert.NotContains(t, err.Error(), "eQ==", "no value in the error")
			})
		}
	})
	t.Run("decoding never quotes the payload", func(t *testing.T) {
		for _, b := range []string{`{"secret":{"data":{"k":"not-base64!"}}}`, `{"secret":{"data":{"k":42}}}`, `{"surprise":"s3cr3t"}`, `{"a":1} trailing`, ``, `{"secret":{"data":{"k":"czNjcjN0"}},"x":s3cr3t}`} {
			_, err := receiveSecret("n", hs, []byte(b))
			require.Error(t, err, b)
			assert.NotContains(t, err.Error(), "s3cr3t")
			assert.NotContains(t, err.Error(), "not-base64")
		}
	})
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
