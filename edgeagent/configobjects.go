package edgeagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/edgeset/edgeset/schema"
)

// maxConfigMessage bounds a ConfigMap or Secret payload: a MaxConfigSize
// object grows by base64 and JSON escaping on the wire.
const maxConfigMessage = 4 * schema.MaxConfigSize

// handleConfigMap verifies and caches a ConfigMap the desired state is
// waiting for. It returns false only when it could not be persisted.
func (a *Agent) handleConfigMap(ctx context.Context, hash string, b []byte) bool {
	topic := schema.ConfigMapTopic(hash)
	if !a.waitingFor(topic) {
		a.log.Debug("ignoring configmap not waited for", "topic", topic)
		return true
	}
	var m schema.ConfigMapMessage
	err := decodeConfigMessage(b, &m)
	if err == nil {
		err = checkConfigMap(hash, m)
	}
	if err != nil {
		a.log.Warn("rejecting configmap", "topic", topic, "err", err)
		return true
	}
	if err := a.store.saveConfigMap(hash, m.ConfigMap); err != nil {
		a.log.Error("cannot persist configmap; will retry", "configMap", m.ConfigMap.Key(), "err", err)
		return false
	}
	a.configMaps[hash] = m.ConfigMap
	a.log.Info("cached configmap", "configMap", m.ConfigMap.Key(), "hash", hash)
	a.updateSubscriptions(ctx)
	return true
}

// handleSecret verifies and caches a Secret of this node the desired state
// is waiting for. It returns false only when it could not be persisted.
// Nothing it logs carries a value.
func (a *Agent) handleSecret(ctx context.Context, hash string, b []byte) bool {
	topic := schema.NodeSecretTopic(a.cfg.NodeName, hash)
	if !a.waitingFor(topic) {
		a.log.Debug("ignoring secret not waited for", "topic", topic)
		return true
	}
	var m schema.SecretMessage
	err := decodeConfigMessage(b, &m)
	if err == nil {
		err = checkSecret(a.cfg.NodeName, hash, m)
	}
	if err != nil {
		a.log.Warn("rejecting secret", "topic", topic, "err", err)
		return true
	}
	if err := a.store.saveSecret(hash, m.Secret); err != nil {
		a.log.Error("cannot persist secret; will retry", "secret", m.Secret.Key(), "err", err)
		return false
	}
	a.secrets[hash] = m.Secret
	a.log.Info("cached secret", "secret", m.Secret.Key(), "hash", hash)
	a.updateSubscriptions(ctx)
	return true
}

// decodeConfigMessage decodes a ConfigMap or Secret message strictly: size
// bounded, unknown fields and trailing data rejected. Its errors never
// quote the payload, which may be a secret.
func decodeConfigMessage(b []byte, v any) error {
	if len(b) > maxConfigMessage {
		return fmt.Errorf("%w: %d bytes, limit %d", schema.ErrMessageTooLarge, len(b), maxConfigMessage)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			return fmt.Errorf("decode %T: field %s: must be %s", v, te.Field, te.Type)
		case errors.As(err, &se):
			return fmt.Errorf("decode %T: invalid JSON at offset %d", v, se.Offset)
		case errors.Is(err, io.EOF):
			return fmt.Errorf("decode %T: empty message", v)
		}
		return fmt.Errorf("decode %T: %w", v, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("decode %T: trailing data after the JSON object", v)
	}
	return nil
}

// checkConfigMap verifies that m is the ConfigMap published on hash's
// topic: hash, m.Hash and the content hash agree.
func checkConfigMap(hash string, m schema.ConfigMapMessage) error {
	if m.SchemaVersion != schema.WireVersion {
		return fmt.Errorf("schemaVersion: %w %d", schema.ErrSchemaVersion, m.SchemaVersion)
	}
	if m.Hash != hash {
		return fmt.Errorf("hash: message carries %s on the topic of %s", m.Hash, hash)
	}
	if got := schema.ConfigMapHash(m.ConfigMap); got != hash {
		return fmt.Errorf("configMap: content hashes to %s, not %s", got, hash)
	}
	if m.ConfigMap.Metadata.Name == "" {
		return errors.New("configMap.metadata.name: required")
	}
	return nil
}

// checkSecret verifies that m is the Secret for node published on hash's
// topic: node, hash, m.Hash and the content hash agree.
func checkSecret(node, hash string, m schema.SecretMessage) error {
	if m.SchemaVersion != schema.WireVersion {
		return fmt.Errorf("schemaVersion: %w %d", schema.ErrSchemaVersion, m.SchemaVersion)
	}
	if m.Node != node {
		return fmt.Errorf("node: secret is for %q, this is %q", m.Node, node)
	}
	if m.Hash != hash {
		return fmt.Errorf("hash: message carries %s on the topic of %s", m.Hash, hash)
	}
	if got := schema.SecretHash(m.Secret); got != hash {
		return fmt.Errorf("secret: content hashes to %s, not %s", got, hash)
	}
	if m.Secret.Metadata.Name == "" {
		return errors.New("secret.metadata.name: required")
	}
	return nil
}

// restoreConfigObjects adopts the persisted ConfigMaps and Secrets whose
// content still hashes to their key; the others are fetched again.
func (a *Agent) restoreConfigObjects(st localState) {
	for h, cm := range st.configMaps {
		if schema.ConfigMapHash(cm) != h {
			a.log.Warn("dropping corrupt cached configmap", "hash", h)
			continue
		}
		a.configMaps[h] = cm
	}
	for h, s := range st.secrets {
		if schema.SecretHash(s) != h {
			a.log.Warn("dropping corrupt cached secret", "hash", h)
			continue
		}
		a.secrets[h] = s
	}
}

// pendingObject is a config object the desired state lists that has not
// arrived yet.
type pendingObject struct {
	kind, namespace, name string // kind is "configmap" or "secret"
}

func (p pendingObject) String() string { return p.kind + " " + p.namespace + "/" + p.name }

// configObjectsFor returns the ConfigMaps and Secrets of namespace ns that
// the desired state lists, by name, and those listed but not yet received
// (an instance waits for them rather than report them missing).
func (a *Agent) configObjectsFor(ns string) (cms map[string]schema.ConfigMap, secrets map[string]schema.Secret, pending []pendingObject) {
	cms, secrets = map[string]schema.ConfigMap{}, map[string]schema.Secret{}
	if a.desired == nil {
		return cms, secrets, nil
	}
	for _, r := range a.desired.ConfigMaps {
		if r.Namespace != ns {
			continue
		}
		if cm, ok := a.configMaps[r.Hash]; ok {
			cms[r.Name] = cm
		} else {
			pending = append(pending, pendingObject{"configmap", ns, r.Name})
		}
	}
	for _, r := range a.desired.Secrets {
		if r.Namespace != ns {
			continue
		}
		if s, ok := a.secrets[r.Hash]; ok {
			secrets[r.Name] = s
		} else {
			pending = append(pending, pendingObject{"secret", ns, r.Name})
		}
	}
	return cms, secrets, pending
}
