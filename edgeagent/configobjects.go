package edgeagent

import (
	"context"
	"errors"
	"fmt"

	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/sealing"
)

// handleConfigMap verifies and caches a ConfigMap the desired state is
// waiting for. It returns false only when it could not be persisted.
func (a *Agent) handleConfigMap(ctx context.Context, hash string, b []byte) bool {
	topic := schema.ConfigMapTopic(hash)
	if !a.waitingFor(topic) {
		a.log.Debug("ignoring configmap not waited for", "topic", topic)
		return true
	}
	m, err := receiveConfigMap(hash, b)
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

// handleSecret opens (sealed.go), verifies and caches a Secret of this
// node the desired state is waiting for, keeping it at rest sealed, or
// only in memory. It returns false only when it could not be persisted.
// Nothing it logs carries a value.
func (a *Agent) handleSecret(ctx context.Context, hash string, b []byte) bool {
	topic := schema.NodeSecretTopic(a.cfg.NodeName, hash)
	if !a.waitingFor(topic) {
		a.log.Debug("ignoring secret not waited for", "topic", topic)
		return true
	}
	m, sealed, err := a.openSecret(hash, b)
	if errors.Is(err, sealing.ErrNotForKey) {
		a.log.Info("secret sealed to a key this node no longer holds; waiting for the controller to seal it to the current key",
			"topic", topic, "keyId", a.PublicKey().KeyID(), "err", err)
		return true
	}
	if err != nil {
		a.log.Warn("rejecting secret", "topic", topic, "err", err)
		return true
	}
	if a.cfg.SecretsAtRest == SecretsSealed {
		if err := a.store.saveSecret(hash, sealed); err != nil {
			a.log.Error("cannot persist secret; will retry", "secret", m.Secret.Key(), "err", err)
			return false
		}
	}
	a.secrets[hash] = m.Secret
	a.log.Info("cached secret", "secret", m.Secret.Key(), "hash", hash)
	a.updateSubscriptions(ctx)
	return true
}

// receiveConfigMap decodes the payload b of hash's ConfigMap topic and
// checks it is that ConfigMap. Its errors never quote a value.
func receiveConfigMap(hash string, b []byte) (schema.ConfigMapMessage, error) {
	m, err := schema.DecodeConfigMapMessage(b)
	if err != nil {
		return m, err
	}
	return m, checkConfigMap(hash, m)
}

// receiveSecret decodes the payload b of node's secret topic for hash and
// checks it is that Secret, for node. Its errors never quote a value.
func receiveSecret(node, hash string, b []byte) (schema.SecretMessage, error) {
	m, err := schema.DecodeSecretMessage(b)
	if err != nil {
		return m, err
	}
	return m, checkSecret(node, hash, m)
}

// checkConfigMap verifies that m, decoded and checked against its own
// hash by schema.DecodeConfigMapMessage, is the ConfigMap published on
// hash's topic.
func checkConfigMap(hash string, m schema.ConfigMapMessage) error {
	if m.Hash != hash {
		return fmt.Errorf("hash: message carries %s on the topic of %s", m.Hash, hash)
	}
	return nil
}

// checkSecret verifies that m, decoded and checked against its own hash
// by schema.DecodeSecretMessage, is the Secret for node published on
// hash's topic.
func checkSecret(node, hash string, m schema.SecretMessage) error {
	if m.Node != node {
		return fmt.Errorf("node: secret is for %q, this is %q", m.Node, node)
	}
	if m.Hash != hash {
		return fmt.Errorf("hash: message carries %s on the topic of %s", m.Hash, hash)
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
	a.restoreSecrets(st.secrets)
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
