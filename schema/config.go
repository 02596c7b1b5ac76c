package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Kinds of config objects (core v1).
const (
	APIVersionCore = "v1"
	KindConfigMap  = "ConfigMap"
	KindSecret     = "Secret"
)

// Secret types edgeset accepts, as in Kubernetes.
const (
	SecretTypeOpaque           = "Opaque"
	SecretTypeDockerConfigJSON = "kubernetes.io/dockerconfigjson"
	SecretTypeTLS              = "kubernetes.io/tls"

	SecretTypeDockerConfig        = "kubernetes.io/dockercfg"
	SecretTypeBasicAuth           = "kubernetes.io/basic-auth"
	SecretTypeSSHAuth             = "kubernetes.io/ssh-auth"
	SecretTypeServiceAccountToken = "kubernetes.io/service-account-token"
	ServiceAccountNameAnnotation  = "kubernetes.io/service-account.name"
	DockerConfigKey               = ".dockercfg"
	BasicAuthUsernameKey          = "username"
	BasicAuthPasswordKey          = "password"
	SSHAuthPrivateKey             = "ssh-privatekey"

	// DockerConfigJSONKey is the key of a dockerconfigjson Secret.
	DockerConfigJSONKey = ".dockerconfigjson"
	// TLSCertKey and TLSPrivateKeyKey are the keys of a tls Secret.
	TLSCertKey       = "tls.crt"
	TLSPrivateKeyKey = "tls.key"
)

// MaxConfigSize is Kubernetes' limit on one ConfigMap or Secret (the sum of
// its keys and values); the controller may lower it to what its MQTT
// packet limit can carry.
const MaxConfigSize = 1 << 20

// ConfigMap holds configuration that instances read as files or
// environment variables. It is not secret: every node may read it.
type ConfigMap struct {
	TypeMeta   `json:",inline"`
	Metadata   ObjectMeta        `json:"metadata"`
	Data       map[string]string `json:"data,omitempty"`
	BinaryData map[string][]byte `json:"binaryData,omitempty"`
	Immutable  *bool             `json:"immutable,omitempty"`
}

// Key returns "namespace/name", with the default namespace applied.
func (c *ConfigMap) Key() string { return objectKey(c.Metadata) }

// Secret holds confidential data. Data values are bytes (base64 in JSON and
// YAML); StringData is a write-only convenience merged into Data at decode
// time, as the Kubernetes API server does, so a stored or transmitted
// Secret has Data only.
type Secret struct {
	TypeMeta   `json:",inline"`
	Metadata   ObjectMeta        `json:"metadata"`
	Type       string            `json:"type,omitempty"`
	Data       map[string][]byte `json:"data,omitempty"`
	StringData map[string]string `json:"stringData,omitempty"`
	Immutable  *bool             `json:"immutable,omitempty"`
}

// Key returns "namespace/name", with the default namespace applied.
func (s *Secret) Key() string { return objectKey(s.Metadata) }

func objectKey(m ObjectMeta) string {
	ns := m.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	return ns + "/" + m.Name
}

// ConfigMapHash returns the content address of a ConfigMap: the first 20
// hex digits of the SHA-256 of its canonical JSON encoding.
func ConfigMapHash(c ConfigMap) string { return contentHash(c) }

// SecretHash returns the content address of a Secret, as ConfigMapHash.
func SecretHash(s Secret) string { return contentHash(s) }

func contentHash(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Config objects hold only strings, bytes, bools and maps.
		panic("schema: encode config object: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:20]
}
