package schema

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeConfigObjects(t *testing.T) {
	objs, warns, err := DecodeFile("testdata/config/objects.yaml")
	require.NoError(t, err)
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.Kind())
	}
	require.Equal(t, []string{KindConfigMap, KindSecret, KindSecret, KindSecret, KindSecret}, kinds)

	cm := objs[0].ConfigMap
	assert.Equal(t, "logging/fluent-bit-config", cm.Key())
	assert.Equal(t, map[string]string{"fluent-bit.conf": "[SERVICE]\n    Parsers_File parsers.conf\n", "parsers.conf": ""}, cm.Data)
	assert.Equal(t, map[string][]byte{"logo.png": []byte("\x89PNG\r\n\x1a\n")}, cm.BinaryData)
	require.NoError(t, ValidateConfigMap(cm))

	s := objs[1].Secret
	assert.Equal(t, SecretTypeOpaque, s.Type)
	assert.Equal(t, map[string][]byte{"api-key": []byte("new-key"), "app-key": []byte("app")}, s.Data, "stringData wins")
	assert.Nil(t, s.StringData, "stringData is merged into data")

	assert.Equal(t, "default/registry", objs[2].Secret.Key())
	assert.Equal(t, Source{File: "testdata/config/objects.yaml", Document: 2, Item: 0, Line: 34}, objs[2].Source)
	assert.Equal(t, SecretTypeOpaque, objs[4].Secret.Type, "type defaults to Opaque")
	for _, o := range objs[1:] {
		require.NoError(t, ValidateSecret(o.Secret))
	}

	require.Len(t, warns, 1)
	assert.Equal(t, "testdata/config/objects.yaml:8: metadata.resourceVersion: ignored: set by the Kubernetes API server; edgeset ignores it", warns[0].String())
	assert.Equal(t, WarningKubernetesOnly, warns[0].Class)
}

// configDoc returns a document of kind with the given body after its
// metadata (name x); the body starts on line 5.
func configDoc(kind, body string) string {
	return "apiVersion: v1\nkind: " + kind + "\nmetadata:\n  name: x\n" + body
}

func TestDecodeConfigProblems(t *testing.T) {
	big := strings.Repeat("a", MaxConfigSize)
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"bad base64", configDoc("Secret", "data:\n  key: not*base64\n"),
			[]string{"x.yaml:6: data[key]: invalid base64 (standard encoding, as in Kubernetes): illegal base64 data at input byte 3"}},
		{"bad binaryData", configDoc("ConfigMap", "binaryData:\n  k: '%%%'\n"),
			[]string{"x.yaml:6: binaryData[k]: invalid base64 (standard encoding, as in Kubernetes): illegal base64 data at input byte 0"}},
		{"key not a file name", configDoc("ConfigMap", "data:\n  conf/app.yaml: x\n  ..data: y\n  .: z\n"), []string{
			`x.yaml:6: data[conf/app.yaml]: invalid key "conf/app.yaml": must consist of alphanumerics, '-', '_' or '.' (it becomes a file name)`,
			`x.yaml:7: data[..data]: invalid key "..data": must not start with '..'`,
			`x.yaml:8: data[.]: invalid key ".": must not be '.' or '..'`,
		}},
		{"key in data and binaryData", configDoc("ConfigMap", "data:\n  a: x\nbinaryData:\n  a: eA==\n"),
			[]string{`x.yaml:8: binaryData[a]: key "a" is also in data: a key may be in data or binaryData, not both`}},
		{"secret over the limit", configDoc("Secret", "stringData:\n  big: "+big+"\n"),
			[]string{"x.yaml:1: data: too large: 1048579 bytes of keys and values, more than the limit of 1048576 bytes (1 MiB) for a Secret"}},
		{"configmap over the limit", configDoc("ConfigMap", "data:\n  big: "+big+"\n"),
			[]string{"x.yaml:5: data: too large: 1048579 bytes of keys and values, more than the limit of 1048576 bytes (1 MiB) for a ConfigMap"}},
		{"dockerconfigjson missing", configDoc("Secret", "type: kubernetes.io/dockerconfigjson\n"),
			[]string{"x.yaml:1: data[.dockerconfigjson]: required for a Secret of type kubernetes.io/dockerconfigjson"}},
		{"dockerconfigjson without auths", configDoc("Secret", "type: kubernetes.io/dockerconfigjson\nstringData:\n  .dockerconfigjson: '{\"x\": 1}'\n"),
			[]string{`x.yaml:1: data[.dockerconfigjson]: invalid docker config JSON: must have an "auths" object`}},
		{"dockerconfigjson not JSON", configDoc("Secret", "type: kubernetes.io/dockerconfigjson\nstringData:\n  .dockerconfigjson: '{'\n"),
			[]string{`x.yaml:1: data[.dockerconfigjson]: invalid docker config JSON: unexpected end of JSON input`}},
		{"dockerconfigjson error quotes no character of the secret", configDoc("Secret", "type: kubernetes.io/dockerconfigjson\nstringData:\n  .dockerconfigjson: '{\"auths\": Zpassword}'\n"),
			[]string{`x.yaml:1: data[.dockerconfigjson]: invalid docker config JSON: syntax error at byte 11`}},
		{"dockerconfigjson wrong type", configDoc("Secret", "type: kubernetes.io/dockerconfigjson\nstringData:\n  .dockerconfigjson: '{\"auths\": 5}'\n"),
			[]string{`x.yaml:1: data[.dockerconfigjson]: invalid docker config JSON: auths must be an object`}},
		{"tls without key", configDoc("Secret", "type: kubernetes.io/tls\ndata:\n  tls.crt: eA==\n"),
			[]string{"x.yaml:6: data[tls.key]: required for a Secret of type kubernetes.io/tls"}},
		{"basic-auth empty", configDoc("Secret", "type: kubernetes.io/basic-auth\n"),
			[]string{"x.yaml:1: data: a Secret of type kubernetes.io/basic-auth must have username or password"}},
		{"ssh-auth without key", configDoc("Secret", "type: kubernetes.io/ssh-auth\nstringData: {x: y}\n"),
			[]string{"x.yaml:1: data[ssh-privatekey]: required for a Secret of type kubernetes.io/ssh-auth"}},
		{"wrong apiVersion", "apiVersion: apps/v1\nkind: ConfigMap\nmetadata: {name: x}\n",
			[]string{`x.yaml:1: apiVersion: unsupported apiVersion "apps/v1" for kind ConfigMap: want v1`}},
		{"unknown field", configDoc("ConfigMap", "spec: {}\n"), []string{"x.yaml:5: spec: unknown field"}},
		{"bad name", "apiVersion: v1\nkind: Secret\nmetadata: {name: Bad_Name, namespace: a.b}\n", []string{
			`x.yaml:3: metadata.name: invalid name "Bad_Name": must be a DNS-1123 subdomain (lowercase alphanumerics, '-' and '.', at most 253 characters)`,
			`x.yaml:3: metadata.namespace: invalid namespace "a.b": must be a DNS-1123 label (lowercase alphanumerics and '-', at most 63 characters)`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs, _, err := Decode("x.yaml", []byte(tc.in))
			assert.Empty(t, objs)
			assert.Equal(t, tc.want, problems(t, err))
		})
	}
}

func TestDecodeServiceAccountTokenSecret(t *testing.T) {
	in := configDoc("Secret", "type: kubernetes.io/service-account-token\n")
	_, _, err := Decode("x.yaml", []byte(in))
	assert.Equal(t, []string{"x.yaml:3: metadata.annotations[kubernetes.io/service-account.name]: required for a Secret of type kubernetes.io/service-account-token"}, problems(t, err))

	in = strings.Replace(in, "  name: x\n", "  name: x\n  annotations: {kubernetes.io/service-account.name: agent}\n", 1)
	objs, warns, err := Decode("x.yaml", []byte(in))
	require.NoError(t, err)
	require.Len(t, objs, 1)
	require.Len(t, warns, 1)
	assert.Equal(t, "type", warns[0].Field)
	assert.Equal(t, WarningKubernetesOnly, warns[0].Class)
	assert.Contains(t, warns[0].Message, "no token controller fills")
}

func TestDecodeBinaryTagAndLineBreaks(t *testing.T) {
	in := configDoc("Secret", "data:\n  a: !!binary aGVs\n    bG8=\n  b: |\n    aGVs\n    bG8=\n")
	objs, _, err := Decode("x.yaml", []byte(in))
	require.NoError(t, err)
	assert.Equal(t, map[string][]byte{"a": []byte("hello"), "b": []byte("hello")}, objs[0].Secret.Data)

	// A plain multi-line scalar folds into "aGVs bG8=", which Kubernetes
	// refuses too.
	_, _, err = Decode("x.yaml", []byte(configDoc("Secret", "data:\n  a: aGVs\n    bG8=\n")))
	assert.Equal(t, []string{"x.yaml:6: data[a]: invalid base64 (standard encoding, as in Kubernetes): illegal base64 data at input byte 4"}, problems(t, err))
}

func TestConfigKeyProblem(t *testing.T) {
	for _, ok := range []string{"a", ".env", "tls.crt", "a-b_c.d", "..a"[1:], strings.Repeat("k", 253)} {
		assert.Empty(t, ConfigKeyProblem(ok), ok)
	}
	for _, bad := range []string{"", ".", "..", "..a", "a/b", "a b", "é", strings.Repeat("k", 254)} {
		assert.NotEmpty(t, ConfigKeyProblem(bad), bad)
	}
}

func TestMergeStringData(t *testing.T) {
	s := &Secret{Data: map[string][]byte{"a": []byte("1"), "b": []byte("2")}, StringData: map[string]string{"b": "3", "c": "4"}}
	MergeStringData(s)
	assert.Equal(t, map[string][]byte{"a": []byte("1"), "b": []byte("3"), "c": []byte("4")}, s.Data)
	assert.Nil(t, s.StringData)
	empty := &Secret{StringData: map[string]string{}}
	MergeStringData(empty)
	assert.Nil(t, empty.Data)
	assert.Nil(t, empty.StringData)
}
