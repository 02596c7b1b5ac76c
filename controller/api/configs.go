package api

import (
	"context"
	"net/http"
	"time"
)

// ConfigKey is one key of a ConfigMap or Secret and the size of its value
// in bytes.
type ConfigKey struct {
	Key  string `json:"key"`
	Size int    `json:"size"`
	// Binary marks a ConfigMap's binaryData key.
	Binary bool `json:"binary,omitempty"`
}

// ConfigMeta is what ConfigMaps and Secrets share in the API.
type ConfigMeta struct {
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// Generation starts at 1 and grows with each change of content;
	// ResourceVersion changes with every change of the object.
	Generation      int64  `json:"generation"`
	ResourceVersion uint64 `json:"resourceVersion"`
	// Hash is the content address devices receive it under.
	Hash      string    `json:"hash"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Source says who applied it last, as DaemonSet.Source.
	Source string `json:"source,omitempty"`
	// Keys lists every key with the size of its value, sorted.
	Keys []ConfigKey `json:"keys"`
	// ReferencedBy lists the daemonsets ("namespace/name") whose template
	// references the object, sorted.
	ReferencedBy []string `json:"referencedBy,omitempty"`
	// Nodes counts the nodes it is delivered to now.
	Nodes int `json:"nodes"`
}

// Key returns "namespace/name".
func (m *ConfigMeta) Key() string { return m.Namespace + "/" + m.Name }

// ConfigMap is a ConfigMap as the API returns it, values included (a
// ConfigMap is not secret).
type ConfigMap struct {
	ConfigMeta
	Data       map[string]string `json:"data,omitempty"`
	BinaryData map[string][]byte `json:"binaryData,omitempty"`
	Immutable  *bool             `json:"immutable,omitempty"`
}

// Secret is a Secret as the API returns it: keys and sizes only, unless
// the request asked for values (showValues=true); Data is nil otherwise.
type Secret struct {
	ConfigMeta
	Type      string            `json:"type"`
	Data      map[string][]byte `json:"data,omitempty"`
	Immutable *bool             `json:"immutable,omitempty"`
}

// ConfigBackend is the part of Backend that serves config objects.
type ConfigBackend interface {
	ListConfigMaps(ctx context.Context) ([]ConfigMap, error)
	GetConfigMap(ctx context.Context, key string) (ConfigMap, error)
	DeleteConfigMap(ctx context.Context, key string) error
	// ListSecrets and GetSecret return values only with showValues.
	ListSecrets(ctx context.Context, showValues bool) ([]Secret, error)
	GetSecret(ctx context.Context, key string, showValues bool) (Secret, error)
	DeleteSecret(ctx context.Context, key string) error
}

func (s *Server) configRoutes(p string) {
	s.handle("GET "+p+"/configmaps", func(_ http.ResponseWriter, r *http.Request) (any, error) {
		return s.backend.ListConfigMaps(r.Context())
	})
	s.handle("GET "+p+"/configmaps/{namespace}/{name}", func(_ http.ResponseWriter, r *http.Request) (any, error) {
		return s.backend.GetConfigMap(r.Context(), dsKey(r))
	})
	s.handle("DELETE "+p+"/configmaps/{namespace}/{name}", func(_ http.ResponseWriter, r *http.Request) (any, error) {
		return map[string]string{"deleted": dsKey(r)}, s.backend.DeleteConfigMap(r.Context(), dsKey(r))
	})
	s.handle("GET "+p+"/secrets", func(_ http.ResponseWriter, r *http.Request) (any, error) {
		show, err := boolQuery(r, "showValues")
		if err != nil {
			return nil, err
		}
		return s.backend.ListSecrets(r.Context(), show)
	})
	s.handle("GET "+p+"/secrets/{namespace}/{name}", func(_ http.ResponseWriter, r *http.Request) (any, error) {
		show, err := boolQuery(r, "showValues")
		if err != nil {
			return nil, err
		}
		return s.backend.GetSecret(r.Context(), dsKey(r), show)
	})
	s.handle("DELETE "+p+"/secrets/{namespace}/{name}", func(_ http.ResponseWriter, r *http.Request) (any, error) {
		return map[string]string{"deleted": dsKey(r)}, s.backend.DeleteSecret(r.Context(), dsKey(r))
	})
}

// ListConfigMaps returns every ConfigMap.
func (c *Client) ListConfigMaps(ctx context.Context) ([]ConfigMap, error) {
	var out []ConfigMap
	return out, c.do(ctx, http.MethodGet, "/configmaps", nil, &out)
}

// GetConfigMap returns one ConfigMap; key is "namespace/name".
func (c *Client) GetConfigMap(ctx context.Context, key string) (ConfigMap, error) {
	var out ConfigMap
	return out, c.do(ctx, http.MethodGet, "/configmaps/"+escapeKey(key), nil, &out)
}

// DeleteConfigMap deletes a ConfigMap.
func (c *Client) DeleteConfigMap(ctx context.Context, key string) error {
	return c.do(ctx, http.MethodDelete, "/configmaps/"+escapeKey(key), nil, nil)
}

// ListSecrets returns every Secret, with values only if showValues.
func (c *Client) ListSecrets(ctx context.Context, showValues bool) ([]Secret, error) {
	var out []Secret
	return out, c.do(ctx, http.MethodGet, "/secrets"+showValuesQuery(showValues), nil, &out)
}

// GetSecret returns one Secret, with values only if showValues.
func (c *Client) GetSecret(ctx context.Context, key string, showValues bool) (Secret, error) {
	var out Secret
	return out, c.do(ctx, http.MethodGet, "/secrets/"+escapeKey(key)+showValuesQuery(showValues), nil, &out)
}

// DeleteSecret deletes a Secret.
func (c *Client) DeleteSecret(ctx context.Context, key string) error {
	return c.do(ctx, http.MethodDelete, "/secrets/"+escapeKey(key), nil, nil)
}

func showValuesQuery(show bool) string {
	if show {
		return "?showValues=true"
	}
	return ""
}
