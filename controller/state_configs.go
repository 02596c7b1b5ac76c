package controller

import (
	"time"

	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/controller/registry"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// The config side of fleetState: ConfigMaps, Secrets, revisions' config
// references, the published config topics and the revision templates.
// Every write of a config object or reference marks the configs.

// loadConfigs reads the config objects and every revision's references.
func (fs *fleetState) loadConfigs(st *store.Store, _ *registry.Registry, _ time.Duration) error {
	cms, err := st.ListConfigMaps()
	if err != nil {
		return err
	}
	for _, r := range cms {
		fs.configMaps[r.Object.Key()] = r
	}
	secrets, err := st.ListSecrets()
	if err != nil {
		return err
	}
	for _, r := range secrets {
		fs.secrets[r.Object.Key()] = r
	}
	for key := range fs.daemonsets {
		revs, err := st.ListRevisions(key)
		if err != nil {
			return err
		}
		for _, rev := range revs {
			fs.revisionRefs[rev.Hash] = rev.Template.References()
		}
	}
	return nil
}

// configs is what a pass needs of the config objects: copies, so the pass
// reads them without the lock.
func (fs *fleetState) configs() reconcile.Configs {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	cfg := reconcile.Configs{
		Refs:       make(map[string]schema.ConfigRefs, len(fs.revisionRefs)),
		ConfigMaps: make(map[string]string, len(fs.configMaps)),
		Secrets:    make(map[string]string, len(fs.secrets)),
	}
	for h, r := range fs.revisionRefs {
		cfg.Refs[h] = r
	}
	for k, r := range fs.configMaps {
		cfg.ConfigMaps[k] = r.Hash
	}
	for k, r := range fs.secrets {
		cfg.Secrets[k] = r.Hash
	}
	return cfg
}

// applyConfigs records what a committed request changed of the config
// objects and revision references, drops the daemonsets it deleted, and
// marks all of it. The daemonsets it stored are put by putEntry.
func (fs *fleetState) applyConfigs(out *applied) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for key, rec := range out.configMaps {
		if rec == nil {
			delete(fs.configMaps, key)
		} else {
			fs.configMaps[key] = *rec
		}
	}
	for key, rec := range out.secrets {
		if rec == nil {
			delete(fs.secrets, key)
		} else {
			fs.secrets[key] = *rec
		}
	}
	for _, ch := range out.daemonSets {
		fs.revisionRefs[ch.rev.Hash] = ch.rev.Template.References()
	}
	for key := range out.deleted {
		delete(fs.daemonsets, key)
		fs.markDaemonSetLocked(key)
	}
	if len(out.configMaps) > 0 || len(out.secrets) > 0 || len(out.daemonSets) > 0 {
		fs.markConfigsLocked()
	}
}

// configMap returns the ConfigMap "namespace/name".
func (fs *fleetState) configMap(key string) (store.ConfigMapRecord, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	rec, ok := fs.configMaps[key]
	return rec, ok
}

// configMapList returns every ConfigMap, sorted by key.
func (fs *fleetState) configMapList() []store.ConfigMapRecord {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return sortedValues(fs.configMaps)
}

// secret returns the Secret "namespace/name".
func (fs *fleetState) secret(key string) (store.SecretRecord, bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	rec, ok := fs.secrets[key]
	return rec, ok
}

// secretList returns every Secret, sorted by key.
func (fs *fleetState) secretList() []store.SecretRecord {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return sortedValues(fs.secrets)
}

// sortedValues returns m's values in the order of their keys.
func sortedValues[V any](m map[string]V) []V {
	out := make([]V, 0, len(m))
	for _, key := range sortedKeys(m) {
		out = append(out, m[key])
	}
	return out
}

// missingRevisions returns the revisions desired references that the
// state holds no template of, by hash, with their daemonset.
func (fs *fleetState) missingRevisions(desired map[string]reconcile.NodeDesired) map[string]string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	need := map[string]string{}
	for _, nd := range desired {
		for in := range referenced(nd) {
			if _, ok := fs.revisions[in.Revision]; !ok {
				need[in.Revision] = in.DaemonSet
			}
		}
	}
	return need
}

// addRevision keeps the template of revision hash's template for republishing. Templates are
// published, not decided on: nothing is marked.
func (fs *fleetState) addRevision(hash string, rev schema.Revision) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.revisions[hash] = rev
}

// revisionList returns every kept revision template, sorted by hash.
func (fs *fleetState) revisionList() []schema.Revision {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := make([]schema.Revision, 0, len(fs.revisions))
	for _, hash := range sortedKeys(fs.revisions) {
		out = append(out, fs.revisions[hash])
	}
	return out
}

// republishMessages lists every retained message the fleet must see:
// revisions and config objects first, then desired states, so an agent
// never waits for a template or config object it was told to use. A
// desired state too large to deliver is left out and passed to tooLarge,
// which runs under the lock and must not call fleetState.
func (fs *fleetState) republishMessages(tooLarge func(node string, nd reconcile.NodeDesired, m mqttclient.Message)) []mqttclient.Message {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	msgs := make([]mqttclient.Message, 0, len(fs.revisions)+len(fs.current))
	for _, hash := range sortedKeys(fs.revisions) {
		msgs = append(msgs, revisionMessage(fs.revisions[hash]))
	}
	msgs = append(msgs, fs.publishedConfigMessagesLocked()...)
	for _, node := range sortedKeys(fs.current) {
		m := desiredMessage(node, fs.current[node])
		if !deliverable(m) {
			tooLarge(node, fs.current[node], m)
			continue
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// configTopicsLocked brings the published config topics in line with the
// current desired states: the messages of topics to publish, and the
// empty retained messages that clear topics nothing references any more.
func (fs *fleetState) configTopicsLocked() (publish, clear []mqttclient.Message) {
	add, remove := fs.topics.take()
	for _, tc := range add {
		if m, ok := fs.configMessageLocked(tc); ok {
			publish = append(publish, m)
		}
	}
	for _, tc := range remove {
		clear = append(clear, mqttclient.Message{Topic: tc.topic(), Retained: true})
	}
	return publish, clear
}

// configMessageLocked encodes the object of a config topic; ok is false
// when the object no longer has that hash (its desired states are about
// to change).
func (fs *fleetState) configMessageLocked(tc topicChange) (mqttclient.Message, bool) {
	if tc.node == "" {
		rec, ok := fs.configMaps[tc.key]
		if !ok || rec.Hash != tc.hash {
			return mqttclient.Message{}, false
		}
		return configMapMessage(rec), true
	}
	rec, ok := fs.secrets[tc.key]
	if !ok || rec.Hash != tc.hash {
		return mqttclient.Message{}, false
	}
	return secretMessage(tc.node, rec), true
}

// nodeSecretMessages encodes node's published Secret topics, for a
// publish under a key it just registered.
func (fs *fleetState) nodeSecretMessages(node string) []mqttclient.Message {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var msgs []mqttclient.Message
	for _, h := range sortedKeys(fs.topics.secrets[node]) {
		if m, ok := fs.configMessageLocked(topicChange{node: node, hash: h, key: fs.topics.secrets[node][h]}); ok {
			msgs = append(msgs, m)
		}
	}
	return msgs
}

// publishedConfigMessagesLocked encodes every published config topic, for
// a republish: ConfigMaps, then each node's Secrets.
func (fs *fleetState) publishedConfigMessagesLocked() []mqttclient.Message {
	all := fs.topics.all()
	msgs := make([]mqttclient.Message, 0, len(all))
	for _, tc := range all {
		if m, ok := fs.configMessageLocked(tc); ok {
			msgs = append(msgs, m)
		}
	}
	return msgs
}
