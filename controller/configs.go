package controller

// ConfigMaps and Secrets are stored objects (store.ConfigRecord) that the
// controller delivers to exactly the nodes that need them:
//
//   - A node's desired state lists, by hash, the existing config objects
//     its instances' revisions reference (reconcile.Configs); a change to
//     one of them changes the desired state of exactly the nodes whose
//     instances reference it.
//   - Each ConfigMap version is published once, retained, on
//     schema.ConfigMapTopic(hash), which every node may read; each Secret
//     version is published retained on schema.NodeSecretTopic(node, hash)
//     for every node that needs it, which only that node may read. Topics
//     no desired state references any more are cleared (configTopics).
//   - With spec.rollout.rollOnConfigChange a daemonset's effective template
//     carries ConfigHashAnnotation over the versions of what it
//     references, so a change makes a new revision that the daemonset's
//     own strategy rolls out.
//
// A Secret's values are never logged, never put in events or errors, and
// returned by the API only when asked for explicitly.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/edgeset/edgeset/broker"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
)

// ConfigHashAnnotation is set on the effective template of a daemonset
// with spec.rollout.rollOnConfigChange: a hash over the versions of the
// ConfigMaps and Secrets the template references (a missing one counts as
// absent), so that a change of one of them is a new revision.
const ConfigHashAnnotation = "edgeset.io/config-hash"

// Kind prefixes of config object keys in events and configChanges.
const (
	configMapObject = "configmap/"
	secretObject    = "secret/"
)

// Delivery limits: a config object's or revision's message, with its
// topic and MQTT header, must fit the broker's max packet size.
const (
	maxPacketSize = broker.DefaultMaxPacketSize
	// messageOverhead covers the topic (a secret topic holds a node name
	// of up to 253 bytes) and the MQTT fixed and variable headers.
	messageOverhead = 512
	deliveryLimit   = maxPacketSize - messageOverhead
)

// MaxConfigObjects bounds the ConfigMaps, and separately the Secrets, the
// controller holds: each may be delivered to every node and is kept in
// every agent's database, so an API client must not be able to grow them
// without end. Updating an object already held is always allowed.
const MaxConfigObjects = 10000

// checkQuota refuses to create the object named object (of kind, which
// count counts) once MaxConfigObjects of its kind exist.
func checkQuota(existed bool, kind, object string, count func() (int, error)) error {
	if existed {
		return nil
	}
	n, err := count()
	if err != nil {
		return err
	}
	if n >= MaxConfigObjects {
		return fmt.Errorf("%w: %s: the controller already holds %d %ss, its limit; delete unused ones first", api.ErrInvalid, object, n, kind)
	}
	return nil
}

// configChanges are the config objects ("configmap/ns/name",
// "secret/ns/name") whose version a request changed: created, changed
// content, or deleted.
type configChanges map[string]bool

// affects reports whether ds references one of the changed objects.
func (ch configChanges) affects(ds *schema.DaemonSet) bool { return ch.names(ds) != "" }

// names lists the changed objects ds references, comma-separated.
func (ch configChanges) names(ds *schema.DaemonSet) string {
	if len(ch) == 0 {
		return ""
	}
	ns := ds.Metadata.Namespace
	if ns == "" {
		ns = schema.DefaultNamespace
	}
	refs := ds.Spec.Template.References()
	var out []string
	for _, n := range refs.ConfigMaps {
		if ch[configMapObject+ns+"/"+n] {
			out = append(out, configMapObject+n)
		}
	}
	for _, n := range refs.Secrets {
		if ch[secretObject+ns+"/"+n] {
			out = append(out, secretObject+n)
		}
	}
	return strings.Join(out, ", ")
}

// rollsOnConfigChange reports whether ds asks for a new revision when a
// config object it references changes.
func rollsOnConfigChange(ds *schema.DaemonSet) bool {
	return ds.Spec.Rollout != nil && ds.Spec.Rollout.RollOnConfigChange
}

// configVersions gives the version of a referenced config object ("" when
// it does not exist): kind is configMapObject or secretObject, key
// "namespace/name".
type configVersions func(kind, key string) string

// effectiveTemplate returns the template ds's revisions hold: its own,
// with rollOnConfigChange the ConfigHashAnnotation over versions of the
// objects it references, without it the template minus any such
// annotation (one copied in by an undo). ds is not modified.
func effectiveTemplate(ds *schema.DaemonSet, versions configVersions) schema.PodTemplateSpec {
	t := ds.Spec.Template
	annotations := make(map[string]string, len(t.Metadata.Annotations)+1)
	for k, v := range t.Metadata.Annotations {
		if k != ConfigHashAnnotation && k != schema.ImagePinsAnnotation {
			annotations[k] = v
		}
	}
	if rollsOnConfigChange(ds) {
		annotations[ConfigHashAnnotation] = configHash(ds, versions)
	}
	if len(annotations) == 0 {
		annotations = nil
	}
	t.Metadata.Annotations = annotations
	return t
}

// configHash hashes the versions of the objects ds references, in order.
func configHash(ds *schema.DaemonSet, versions configVersions) string {
	ns := ds.Metadata.Namespace
	if ns == "" {
		ns = schema.DefaultNamespace
	}
	refs := ds.Spec.Template.References()
	h := sha256.New()
	for _, kind := range []struct {
		prefix string
		names  []string
	}{{configMapObject, refs.ConfigMaps}, {secretObject, refs.Secrets}} {
		for _, n := range kind.names {
			fmt.Fprintf(h, "%s%s=%s\n", kind.prefix, n, versions(kind.prefix, ns+"/"+n))
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:20]
}

// txConfigVersions reads versions inside a transaction, seeing its own
// writes. A ConfigMap's version is its content hash (public anyway); a
// Secret's is its creation time and generation, which say when it changed
// and nothing of its content, since revisions are readable by every node.
func txConfigVersions(tx *store.Txn) configVersions {
	return func(kind, key string) string {
		if kind == configMapObject {
			rec, found, err := tx.GetConfigMap(key)
			if err != nil || !found {
				return ""
			}
			return rec.Hash
		}
		rec, found, err := tx.GetSecret(key)
		if err != nil || !found {
			return ""
		}
		return secretVersion(rec)
	}
}

func secretVersion(rec store.SecretRecord) string {
	return fmt.Sprintf("%d.%d", rec.CreatedAt.UnixNano(), rec.Generation)
}

// applyConfigMap stores one ConfigMap within an apply.
func applyConfigMap(tx *store.Txn, cm schema.ConfigMap, source string, now time.Time, out *applied, changed configChanges) (api.ApplyResult, error) {
	key := cm.Key()
	res := api.ApplyResult{Kind: schema.KindConfigMap, Key: key}
	old, existed, err := tx.GetConfigMap(key)
	if err != nil {
		return res, err
	}
	if existed {
		if err := immutableChange(old.Object.Immutable, cm.Immutable, configMapObject+key,
			!sameJSON(old.Object.Data, cm.Data) || !sameJSON(old.Object.BinaryData, cm.BinaryData)); err != nil {
			return res, err
		}
	}
	if err := checkQuota(existed, schema.KindConfigMap, configMapObject+key, tx.CountConfigMaps); err != nil {
		return res, err
	}
	rec, ch, err := tx.PutConfigMap(cm, source, now)
	if err != nil {
		return res, err
	}
	res.Action, res.Generation = applyAction(existed, ch), rec.Generation
	out.configMaps[key] = &rec
	if !existed || old.Hash != rec.Hash {
		changed[configMapObject+key] = true
	}
	if ch {
		out.event(configMapObject+key, "Applied", fmt.Sprintf("%s: generation %d, %d key(s)", res.Action, rec.Generation,
			len(rec.Object.Data)+len(rec.Object.BinaryData)))
	}
	return res, nil
}

// applySecret stores one Secret within an apply. Its events name its keys'
// count only.
func applySecret(tx *store.Txn, s schema.Secret, source string, now time.Time, out *applied, changed configChanges) (api.ApplyResult, error) {
	key := s.Key()
	res := api.ApplyResult{Kind: schema.KindSecret, Key: key}
	old, existed, err := tx.GetSecret(key)
	if err != nil {
		return res, err
	}
	if existed {
		next := store.WireSecret(s)
		if err := immutableChange(old.Object.Immutable, s.Immutable, secretObject+key,
			!sameJSON(old.Object.Data, next.Data) || old.Object.Type != next.Type); err != nil {
			return res, err
		}
	}
	if err := checkQuota(existed, schema.KindSecret, secretObject+key, tx.CountSecrets); err != nil {
		return res, err
	}
	rec, ch, err := tx.PutSecret(s, source, now)
	if err != nil {
		return res, err
	}
	res.Action, res.Generation = applyAction(existed, ch), rec.Generation
	out.secrets[key] = &rec
	if !existed || old.Hash != rec.Hash {
		changed[secretObject+key] = true
	}
	if ch {
		out.event(secretObject+key, "Applied", fmt.Sprintf("%s: generation %d, %d key(s)", res.Action, rec.Generation, len(rec.Object.Data)))
	}
	return res, nil
}

// immutableChange refuses, as Kubernetes does, a change of the content of
// an object marked immutable, and unmarking it. The error names the object
// and the field, never a value.
func immutableChange(was, now *bool, object string, contentChanged bool) error {
	if was == nil || !*was {
		return nil
	}
	field, msg := "", ""
	switch {
	case now == nil || !*now:
		field, msg = "immutable", object+" is immutable: immutable cannot be unset (delete and re-create it)"
	case contentChanged:
		field, msg = "data", object+" is immutable: its data cannot change (delete and re-create it)"
	default:
		return nil
	}
	return &schema.ValidationError{Errors: []schema.FieldError{{Field: field, Message: msg}}}
}

// sameJSON reports whether a and b encode alike (maps in key order).
func sameJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// checkConfigMap refuses a ConfigMap without a name, over
// schema.MaxConfigSize, or whose message would not fit limit.
func checkConfigMap(cm *schema.ConfigMap, limit int, add func(field, msg string)) {
	if cm.Metadata.Name == "" {
		add("metadata.name", "required")
		return
	}
	size := 0
	for k, v := range cm.Data {
		size += len(k) + len(v)
	}
	for k, v := range cm.BinaryData {
		size += len(k) + len(v)
	}
	wire := store.WireConfigMap(*cm)
	msg := messageSize(schema.ConfigMapMessage{SchemaVersion: schema.WireVersion, Hash: schema.ConfigMapHash(wire), ConfigMap: wire})
	checkSize(configMapObject+cm.Key(), size, msg, limit, add)
}

// checkSecret is checkConfigMap for a Secret, as delivered sealed (a
// third larger: the ciphertext in base64); the error names sizes only.
func checkSecret(s *schema.Secret, limit int, add func(field, msg string)) {
	if s.Metadata.Name == "" {
		add("metadata.name", "required")
		return
	}
	wire := store.WireSecret(*s)
	size := 0
	for k, v := range wire.Data {
		size += len(k) + len(v)
	}
	plain := messageSize(schema.SecretMessage{SchemaVersion: schema.WireVersion, Node: strings.Repeat("n", 253),
		Hash: schema.SecretHash(wire), Secret: wire})
	checkSize(secretObject+s.Key(), size, schema.SealedSize(253, plain), limit, add)
}

func checkSize(object string, size, msg, limit int, add func(field, msg string)) {
	switch {
	case size > schema.MaxConfigSize:
		add("data", fmt.Sprintf("%s is %d bytes (keys and values), over the limit of %d bytes", object, size, schema.MaxConfigSize))
	case msg > limit:
		add("data", fmt.Sprintf("%s is %d bytes as delivered (JSON, binary values in base64), over the limit of %d bytes "+
			"that the broker can deliver (max packet size %d)", object, msg, limit, maxPacketSize))
	}
}

// messageSize is the length of v's JSON encoding.
func messageSize(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return 0
	}
	return len(b)
}

// configTopics are the config object topics published retained: each
// ConfigMap hash with its object's key and the number of desired states
// that reference it, and per node each Secret hash with its object's key.
// replace keeps them in line with one node's desired state at a time and
// records the topics that appeared or disappeared, so a pass costs what
// its changed nodes reference, not what the fleet does.
type configTopics struct {
	configMaps map[string]string            // hash -> "namespace/name"
	cmRefs     map[string]int               // hash -> desired states referencing it
	secrets    map[string]map[string]string // node -> hash -> "namespace/name"
	// added and removed are the topic changes since the last take, by
	// topic; a topic that came and went in between is in neither.
	added, removed map[string]topicChange
}

func newConfigTopics() configTopics {
	return configTopics{configMaps: map[string]string{}, cmRefs: map[string]int{}, secrets: map[string]map[string]string{},
		added: map[string]topicChange{}, removed: map[string]topicChange{}}
}

// load records the topics of one node's stored desired state, published
// already (the first republish sends them again).
func (t *configTopics) load(node string, cms, secrets []schema.ObjectRef) {
	t.replace(node, nil, nil, cms, secrets)
	clear(t.added)
}

// replace moves one node's references from its old desired state's config
// objects to its new one's.
func (t *configTopics) replace(node string, oldCMs, oldSecrets, cms, secrets []schema.ObjectRef) {
	for _, r := range cms {
		if t.cmRefs[r.Hash]++; t.cmRefs[r.Hash] == 1 {
			t.configMaps[r.Hash] = r.Namespace + "/" + r.Name
			t.note(topicChange{hash: r.Hash, key: t.configMaps[r.Hash]}, true)
		}
	}
	for _, r := range oldCMs {
		if t.cmRefs[r.Hash]--; t.cmRefs[r.Hash] <= 0 {
			t.note(topicChange{hash: r.Hash, key: t.configMaps[r.Hash]}, false)
			delete(t.cmRefs, r.Hash)
			delete(t.configMaps, r.Hash)
		}
	}
	old := t.secrets[node]
	next := make(map[string]string, len(secrets))
	for _, r := range secrets {
		next[r.Hash] = r.Namespace + "/" + r.Name
		if _, had := old[r.Hash]; !had {
			t.note(topicChange{node: node, hash: r.Hash, key: next[r.Hash]}, true)
		}
	}
	for h, key := range old {
		if _, keep := next[h]; !keep {
			t.note(topicChange{node: node, hash: h, key: key}, false)
		}
	}
	if len(next) == 0 {
		delete(t.secrets, node)
	} else {
		t.secrets[node] = next
	}
}

// note records that topic tc appeared (added) or disappeared.
func (t *configTopics) note(tc topicChange, added bool) {
	topic := tc.topic()
	from, to := t.removed, t.added
	if !added {
		from, to = t.added, t.removed
	}
	if _, ok := from[topic]; ok {
		delete(from, topic) // back to what is published
		return
	}
	to[topic] = tc
}

// all lists every published topic: ConfigMaps by hash, then each node's
// Secrets by node and hash.
func (t *configTopics) all() []topicChange {
	var out []topicChange
	for _, h := range sortedKeys(t.configMaps) {
		out = append(out, topicChange{hash: h, key: t.configMaps[h]})
	}
	for _, node := range sortedKeys(t.secrets) {
		for _, h := range sortedKeys(t.secrets[node]) {
			out = append(out, topicChange{node: node, hash: h, key: t.secrets[node][h]})
		}
	}
	return out
}

// pending reports whether topics changed since the last take.
func (t *configTopics) pending() bool { return len(t.added) > 0 || len(t.removed) > 0 }

// take returns the topics that appeared and those that disappeared since
// the last take, each sorted by topic, and forgets them.
func (t *configTopics) take() (add, remove []topicChange) {
	for _, topic := range sortedKeys(t.added) {
		add = append(add, t.added[topic])
	}
	for _, topic := range sortedKeys(t.removed) {
		remove = append(remove, t.removed[topic])
	}
	clear(t.added)
	clear(t.removed)
	return add, remove
}

// topicChange is one config topic to publish or clear.
type topicChange struct {
	node string // "" for a ConfigMap topic
	hash string
	key  string // the object's "namespace/name"
}

func (tc topicChange) topic() string {
	if tc.node == "" {
		return schema.ConfigMapTopic(tc.hash)
	}
	return schema.NodeSecretTopic(tc.node, tc.hash)
}

// configMapMessage encodes a ConfigMap version as published: what a device
// needs of it, under the hash of exactly that.
func configMapMessage(rec store.ConfigMapRecord) mqttclient.Message {
	payload, _ := json.Marshal(schema.ConfigMapMessage{SchemaVersion: schema.WireVersion, Hash: rec.Hash,
		ConfigMap: store.WireConfigMap(rec.Object)})
	return mqttclient.Message{Topic: schema.ConfigMapTopic(rec.Hash), Payload: payload, Retained: true}
}

// secretMessage encodes a Secret version for one node.
func secretMessage(node string, rec store.SecretRecord) mqttclient.Message {
	payload, _ := json.Marshal(schema.SecretMessage{SchemaVersion: schema.WireVersion, Node: node, Hash: rec.Hash,
		Secret: store.WireSecret(rec.Object)})
	return mqttclient.Message{Topic: schema.NodeSecretTopic(node, rec.Hash), Payload: payload, Retained: true}
}
