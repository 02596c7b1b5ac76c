package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/reconcile"
	"github.com/edgeset/edgeset/controller/store"
	"github.com/edgeset/edgeset/schema"
)

// ListConfigMaps returns every ConfigMap, sorted by namespace and name.
func (c *Controller) ListConfigMaps(ctx context.Context) ([]api.ConfigMap, error) {
	recs := c.state.configMapList()
	out := make([]api.ConfigMap, 0, len(recs))
	for _, rec := range recs {
		out = append(out, c.configMapView(rec))
	}
	return out, nil
}

// GetConfigMap returns one ConfigMap.
func (c *Controller) GetConfigMap(ctx context.Context, key string) (api.ConfigMap, error) {
	rec, ok := c.state.configMap(key)
	if !ok {
		return api.ConfigMap{}, fmt.Errorf("configmap %s: %w", key, api.ErrNotFound)
	}
	return c.configMapView(rec), nil
}

// ListSecrets returns every Secret, sorted, its values only with
// showValues.
func (c *Controller) ListSecrets(ctx context.Context, showValues bool) ([]api.Secret, error) {
	recs := c.state.secretList()
	out := make([]api.Secret, 0, len(recs))
	for _, rec := range recs {
		out = append(out, c.secretView(rec, showValues))
	}
	return out, nil
}

// GetSecret returns one Secret, its values only with showValues.
func (c *Controller) GetSecret(ctx context.Context, key string, showValues bool) (api.Secret, error) {
	rec, ok := c.state.secret(key)
	if !ok {
		return api.Secret{}, fmt.Errorf("secret %s: %w", key, api.ErrNotFound)
	}
	return c.secretView(rec, showValues), nil
}

// DeleteConfigMap deletes a ConfigMap. Instances that reference it wait in
// CreateContainerConfigError unless the reference is optional; daemonsets
// with rollOnConfigChange get a new revision. Durable before it returns.
func (c *Controller) DeleteConfigMap(ctx context.Context, key string) error {
	return c.deleteConfig(configMapObject, key, func(tx *store.Txn) (bool, error) { return tx.DeleteConfigMap(key) },
		func(out *applied) { out.configMaps[key] = nil })
}

// DeleteSecret is DeleteConfigMap for a Secret.
func (c *Controller) DeleteSecret(ctx context.Context, key string) error {
	return c.deleteConfig(secretObject, key, func(tx *store.Txn) (bool, error) { return tx.DeleteSecret(key) },
		func(out *applied) { out.secrets[key] = nil })
}

// deleteConfig deletes one config object and rolls the daemonsets that
// roll on its change, in one transaction.
func (c *Controller) deleteConfig(kind, key string, del func(*store.Txn) (bool, error), forget func(*applied)) error {
	c.passMu.Lock()
	defer c.passMu.Unlock()
	out := newApplied()
	found := false
	err := c.store.Update(false, func(tx *store.Txn) error {
		var err error
		if found, err = del(tx); err != nil || !found {
			return err
		}
		return rollOnConfigChanges(tx, configChanges{kind + key: true}, c.imageResolver(), c.now(), out)
	})
	if err != nil {
		return err
	}
	if !found {
		// Said outside the transaction, as GetConfigMap and DeleteDaemonSet
		// say it: the store's wrapping (its file path) means nothing to an
		// operator who mistyped a name.
		return fmt.Errorf("%s %s: %w", strings.TrimSuffix(kind, "/"), key, api.ErrNotFound)
	}
	forget(out)
	out.event(kind+key, "Deleted", "deleted")
	if err := c.commit(out); err != nil {
		return err
	}
	c.wake()
	return nil
}

func (c *Controller) configMapView(rec store.ConfigMapRecord) api.ConfigMap {
	cm := rec.Object
	v := api.ConfigMap{ConfigMeta: c.usage(configMeta(rec, cm.Metadata), false),
		Data: cm.Data, BinaryData: cm.BinaryData, Immutable: cm.Immutable}
	v.Keys = v.Keys[:0]
	for k, val := range cm.Data {
		v.Keys = append(v.Keys, api.ConfigKey{Key: k, Size: len(val)})
	}
	for k, val := range cm.BinaryData {
		v.Keys = append(v.Keys, api.ConfigKey{Key: k, Size: len(val), Binary: true})
	}
	sortKeys(v.Keys)
	return v
}

// secretView shows a Secret's keys and sizes, and its values only with
// showValues.
func (c *Controller) secretView(rec store.SecretRecord, showValues bool) api.Secret {
	s := rec.Object
	v := api.Secret{ConfigMeta: c.usage(configMeta(rec, s.Metadata), true),
		Type: s.Type, Immutable: s.Immutable}
	for k, val := range s.Data {
		v.Keys = append(v.Keys, api.ConfigKey{Key: k, Size: len(val)})
	}
	sortKeys(v.Keys)
	if showValues {
		v.Data = s.Data
	}
	return v
}

func sortKeys(keys []api.ConfigKey) {
	slices.SortFunc(keys, func(a, b api.ConfigKey) int { return strings.Compare(a.Key, b.Key) })
}

// configMeta is the API view of a record's bookkeeping; m is the
// object's metadata.
func configMeta[T store.ConfigObject](rec store.ConfigRecord[T], m schema.ObjectMeta) api.ConfigMeta {
	return api.ConfigMeta{Namespace: m.Namespace, Name: m.Name, Labels: m.Labels, Annotations: m.Annotations,
		Generation: rec.Generation, ResourceVersion: rec.ResourceVersion, Hash: rec.Hash,
		CreatedAt: rec.CreatedAt, UpdatedAt: rec.UpdatedAt, Source: rec.Source, Keys: []api.ConfigKey{}}
}

// usage fills in which daemonsets reference the object and how many nodes
// it is delivered to.
func (c *Controller) usage(v api.ConfigMeta, secret bool) api.ConfigMeta {
	v.ReferencedBy = c.referencedBy(v.Namespace, v.Name, secret)
	ref := schema.ObjectRef{Namespace: v.Namespace, Name: v.Name, Hash: v.Hash}
	v.Nodes = c.state.countNodes(func(d reconcile.NodeDesired) bool {
		refs := d.ConfigMaps
		if secret {
			refs = d.Secrets
		}
		return slices.Contains(refs, ref)
	})
	return v
}

// referencedBy lists the managed daemonsets of namespace whose template
// references the object.
func (c *Controller) referencedBy(namespace, name string, secret bool) []string {
	var out []string
	for _, dv := range c.state.views() {
		e, key := dv.entry, dv.entry.rec.Key()
		if e.orphan() || e.rec.DaemonSet.Metadata.Namespace != namespace {
			continue
		}

		refs := e.rec.DaemonSet.Spec.Template.References()
		names := refs.ConfigMaps
		if secret {
			names = refs.Secrets
		}
		if slices.Contains(names, name) {
			out = append(out, key)
		}
	}
	return out
}
