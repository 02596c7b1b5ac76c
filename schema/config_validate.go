package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
)

// configKeyRE is Kubernetes' IsConfigMapKey character set.
var configKeyRE = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// ConfigKeyProblem explains why k is not a valid ConfigMap or Secret key
// (Kubernetes' IsConfigMapKey: it names a file in a volume), or returns "".
func ConfigKeyProblem(k string) string {
	switch {
	case k == "":
		return "invalid key \"\": must not be empty"
	case len(k) > 253:
		return fmt.Sprintf("invalid key %q: must be at most 253 characters, not %d", k, len(k))
	case !configKeyRE.MatchString(k):
		return fmt.Sprintf("invalid key %q: must consist of alphanumerics, '-', '_' or '.' (it becomes a file name)", k)
	case k == "." || k == "..":
		return fmt.Sprintf("invalid key %q: must not be '.' or '..'", k)
	case strings.HasPrefix(k, ".."):
		return fmt.Sprintf("invalid key %q: must not start with '..'", k)
	}
	return ""
}

// SetConfigMapDefaults fills the ConfigMap's defaults: namespace "default".
func SetConfigMapDefaults(c *ConfigMap) {
	if c.Metadata.Namespace == "" {
		c.Metadata.Namespace = DefaultNamespace
	}
}

// SetSecretDefaults fills the Secret's defaults: namespace "default" and
// type Opaque, as in Kubernetes.
func SetSecretDefaults(s *Secret) {
	if s.Metadata.Namespace == "" {
		s.Metadata.Namespace = DefaultNamespace
	}
	if s.Type == "" {
		s.Type = SecretTypeOpaque
	}
}

// MergeStringData moves StringData into Data, a StringData value winning
// over a Data value of the same key as on the Kubernetes API server, and
// leaves StringData empty.
func MergeStringData(s *Secret) {
	if len(s.StringData) == 0 {
		s.StringData = nil
		return
	}
	if s.Data == nil {
		s.Data = make(map[string][]byte, len(s.StringData))
	}
	for k, v := range s.StringData {
		s.Data[k] = []byte(v)
	}
	s.StringData = nil
}

// ValidateConfigMap checks c as Kubernetes does and returns a
// *ValidationError listing every problem with its field path, or nil: name
// a DNS-1123 subdomain, namespace a DNS-1123 label, valid keys, no key in
// both data and binaryData, and at most MaxConfigSize bytes of keys and
// values. It does not modify c.
func ValidateConfigMap(c *ConfigMap) error {
	var errs fieldErrors
	validateConfigTypeMeta(&errs, c.TypeMeta, KindConfigMap)
	validateMetadata(&errs, &c.Metadata)
	size := 0
	for _, k := range sortedKeys(c.Data) {
		validateConfigKey(&errs, "data", k)
		size += len(k) + len(c.Data[k])
	}
	for _, k := range sortedKeys(c.BinaryData) {
		validateConfigKey(&errs, "binaryData", k)
		if _, dup := c.Data[k]; dup {
			errs.add("binaryData["+k+"]", "key %q is also in data: a key may be in data or binaryData, not both", k)
		}
		size += len(k) + len(c.BinaryData[k])
	}
	validateConfigSize(&errs, "data", KindConfigMap, size)
	return errs.err()
}

// ValidateSecret checks s as Kubernetes does and returns a
// *ValidationError listing every problem with its field path, or nil: the
// ConfigMap rules for its name, keys and size (counting data and stringData
// merged), and the keys its type requires: .dockerconfigjson holding JSON
// with an auths object, tls.crt and tls.key, username or password for
// basic-auth, ssh-privatekey for ssh-auth, the service account annotation
// for service-account-token. An empty type is Opaque. It does not modify s.
func ValidateSecret(s *Secret) error {
	var errs fieldErrors
	validateConfigTypeMeta(&errs, s.TypeMeta, KindSecret)
	validateMetadata(&errs, &s.Metadata)
	merged := make(map[string][]byte, len(s.Data)+len(s.StringData))
	for _, k := range sortedKeys(s.Data) {
		validateConfigKey(&errs, "data", k)
		merged[k] = s.Data[k]
	}
	for _, k := range sortedKeys(s.StringData) {
		validateConfigKey(&errs, "stringData", k)
		merged[k] = []byte(s.StringData[k])
	}
	size := 0
	for k, v := range merged {
		size += len(k) + len(v)
	}
	validateConfigSize(&errs, "data", KindSecret, size)
	validateSecretType(&errs, s, merged)
	return errs.err()
}

func validateConfigTypeMeta(errs *fieldErrors, tm TypeMeta, kind string) {
	if tm.Kind != kind {
		errs.add("kind", "must be %s, not %q", kind, tm.Kind)
	}
	if tm.APIVersion != APIVersionCore {
		errs.add("apiVersion", "must be %s, not %q", APIVersionCore, tm.APIVersion)
	}
}

func validateConfigKey(errs *fieldErrors, field, k string) {
	if p := ConfigKeyProblem(k); p != "" {
		errs.add(field+"["+k+"]", "%s", p)
	}
}

func validateConfigSize(errs *fieldErrors, field, kind string, size int) {
	if size > MaxConfigSize {
		errs.add(field, "too large: %d bytes of keys and values, more than the limit of %d bytes (1 MiB) for a %s",
			size, MaxConfigSize, kind)
	}
}

// dockerConfigJSON is the shape Kubernetes requires of .dockerconfigjson.
type dockerConfigJSON struct {
	Auths map[string]json.RawMessage `json:"auths"`
}

// secretJSONProblem describes a decoding error of a secret's JSON without
// quoting it: encoding/json's syntax errors name the offending character.
func secretJSONProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se) && strings.HasPrefix(se.Error(), "unexpected end"):
		return se.Error()
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	case errors.As(err, &te) && te.Field != "":
		if te.Type.Kind() == reflect.Map || te.Type.Kind() == reflect.Struct {
			return te.Field + " must be an object"
		}
		return te.Field + " must be " + te.Type.String()
	case errors.As(err, &te):
		return "must be a JSON object"
	}
	return err.Error() // io.ErrUnexpectedEOF and the like quote nothing
}

func validateSecretType(errs *fieldErrors, s *Secret, data map[string][]byte) {
	need := func(key string) bool {
		if _, ok := data[key]; !ok {
			errs.add("data["+key+"]", "required for a Secret of type %s", s.Type)
			return false
		}
		return true
	}
	switch s.Type {
	case "", SecretTypeOpaque:
	case SecretTypeDockerConfigJSON:
		if need(DockerConfigJSONKey) {
			var cfg dockerConfigJSON
			if err := json.Unmarshal(data[DockerConfigJSONKey], &cfg); err != nil {
				errs.add("data["+DockerConfigJSONKey+"]", "invalid docker config JSON: %s", secretJSONProblem(err))
			} else if cfg.Auths == nil {
				errs.add("data["+DockerConfigJSONKey+"]", "invalid docker config JSON: must have an \"auths\" object")
			}
		}
	case SecretTypeDockerConfig:
		if need(DockerConfigKey) && !json.Valid(data[DockerConfigKey]) {
			errs.add("data["+DockerConfigKey+"]", "invalid docker config: must be JSON")
		}
	case SecretTypeTLS:
		need(TLSCertKey)
		need(TLSPrivateKeyKey)
	case SecretTypeBasicAuth:
		_, user := data[BasicAuthUsernameKey]
		_, pass := data[BasicAuthPasswordKey]
		if !user && !pass {
			errs.add("data", "a Secret of type %s must have %s or %s", s.Type, BasicAuthUsernameKey, BasicAuthPasswordKey)
		}
	case SecretTypeSSHAuth:
		need(SSHAuthPrivateKey)
	case SecretTypeServiceAccountToken:
		if s.Metadata.Annotations[ServiceAccountNameAnnotation] == "" {
			errs.add("metadata.annotations["+ServiceAccountNameAnnotation+"]", "required for a Secret of type %s", s.Type)
		}
	}
}
