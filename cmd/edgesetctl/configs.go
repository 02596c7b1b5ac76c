package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// Config object kinds, with kubectl's names.
const (
	kindConfigMap = "configmap"
	kindSecret    = "secret"
)

func init() {
	for _, n := range []string{"configmap", "configmaps", "cm"} {
		resourceNames[n] = kindConfigMap
	}
	for _, n := range []string{"secret", "secrets"} {
		resourceNames[n] = kindSecret
	}
}

// fetchConfigMaps lists the ConfigMaps that name and o select.
func fetchConfigMaps(ctx context.Context, c *api.Client, name string, o listOptions, sel selector) ([]api.ConfigMap, error) {
	cms, err := c.ListConfigMaps(ctx)
	if err != nil {
		return nil, err
	}
	cms = slices.DeleteFunc(cms, func(cm api.ConfigMap) bool { return !selectConfig(cm.ConfigMeta, name, o, sel) })
	if name != "" && len(cms) == 0 {
		return nil, fmt.Errorf("configmap %s/%s: %w", o.namespace, name, api.ErrNotFound)
	}
	return cms, nil
}

// fetchSecrets lists the Secrets that name and o select, with values only
// with o.showValues.
func fetchSecrets(ctx context.Context, c *api.Client, name string, o listOptions, sel selector) ([]api.Secret, error) {
	secrets, err := c.ListSecrets(ctx, o.showValues)
	if err != nil {
		return nil, err
	}
	secrets = slices.DeleteFunc(secrets, func(s api.Secret) bool { return !selectConfig(s.ConfigMeta, name, o, sel) })
	if name != "" && len(secrets) == 0 {
		return nil, fmt.Errorf("secret %s/%s: %w", o.namespace, name, api.ErrNotFound)
	}
	return secrets, nil
}

func selectConfig(m api.ConfigMeta, name string, o listOptions, sel selector) bool {
	return (o.all || m.Namespace == o.namespace) && (name == "" || m.Name == name) && sel.Matches(m.Labels)
}

// printConfigMaps prints ConfigMaps as kubectl does: NAME DATA AGE (at
// now); wide adds who references each and on how many nodes it is.
func printConfigMaps(w io.Writer, format string, cms []api.ConfigMap, withNamespace bool, now time.Time) error {
	switch format {
	case outputJSON, outputYAML:
		return printManifests(w, printer{format: format}, manifestObjects(kindConfigMap, cms), false)
	case outputName:
		for _, cm := range cms {
			fmt.Fprintf(w, "configmap/%s\n", cm.Name)
		}
		return nil
	}
	t := newTable(w, configHeaders(withNamespace, format == outputWide, "NAME", "DATA", "AGE")...)
	for _, cm := range cms {
		t.row(configRow(cm.ConfigMeta, withNamespace, format == outputWide, cm.Name, strconv.Itoa(len(cm.Keys)), age(cm.CreatedAt, now))...)
	}
	return t.flush()
}

// printSecrets prints Secrets as kubectl does: NAME TYPE DATA AGE (at
// now). JSON and YAML carry keys and sizes, and values only if the
// controller sent them (--show-values).
func printSecrets(w io.Writer, format string, secrets []api.Secret, withNamespace bool, now time.Time) error {
	switch format {
	case outputJSON, outputYAML:
		return printManifests(w, printer{format: format}, manifestObjects(kindSecret, secrets), false)
	case outputName:
		for _, s := range secrets {
			fmt.Fprintf(w, "secret/%s\n", s.Name)
		}
		return nil
	}
	t := newTable(w, configHeaders(withNamespace, format == outputWide, "NAME", "TYPE", "DATA", "AGE")...)
	for _, s := range secrets {
		t.row(configRow(s.ConfigMeta, withNamespace, format == outputWide, s.Name, orNone(s.Type), strconv.Itoa(len(s.Keys)), age(s.CreatedAt, now))...)
	}
	return t.flush()
}

func configHeaders(withNamespace, wide bool, cols ...string) []string {
	var h []string
	if withNamespace {
		h = append(h, "NAMESPACE")
	}
	h = append(h, cols...)
	if wide {
		h = append(h, "NODES", "HASH", "REFERENCED BY")
	}
	return h
}

func configRow(m api.ConfigMeta, withNamespace, wide bool, cells ...string) []string {
	var row []string
	if withNamespace {
		row = append(row, m.Namespace)
	}
	row = append(row, cells...)
	if wide {
		row = append(row, strconv.Itoa(m.Nodes), shortHash(m.Hash), orNone(strings.Join(m.ReferencedBy, ",")))
	}
	return row
}

// describeConfig shows one ConfigMap or Secret with its keys, sizes, the
// daemonsets that reference it and its events, aged at now. A Secret's
// values are never shown.
func describeConfig(ctx context.Context, c *api.Client, w io.Writer, kind, key string, now time.Time) error {
	var meta api.ConfigMeta
	typ := ""
	if kind == kindConfigMap {
		cm, err := c.GetConfigMap(ctx, key)
		if err != nil {
			return err
		}
		meta = cm.ConfigMeta
	} else {
		s, err := c.GetSecret(ctx, key, false)
		if err != nil {
			return err
		}
		meta, typ = s.ConfigMeta, s.Type
	}
	events, err := c.Events(ctx, api.EventFilter{Object: kind + "/" + key, Limit: describeEvents})
	if err != nil {
		return err
	}
	writeConfig(w, meta, typ, events, now)
	return nil
}

// writeConfig renders a described config object, its events aged at now;
// typ is a Secret's type, empty for a ConfigMap.
func writeConfig(w io.Writer, m api.ConfigMeta, typ string, events []api.Event, now time.Time) {
	field(w, "Name", m.Name)
	field(w, "Namespace", m.Namespace)
	listField(w, "Labels", sortedPairs(m.Labels))
	listField(w, "Annotations", sortedPairs(m.Annotations))
	if typ != "" {
		field(w, "Type", typ)
	}
	field(w, "Version", fmt.Sprintf("generation %d, resourceVersion %d, hash %s", m.Generation, m.ResourceVersion, m.Hash))
	field(w, "Source", orNone(m.Source))
	listField(w, "Used by", m.ReferencedBy)
	field(w, "Nodes", strconv.Itoa(m.Nodes))
	writeKeys(w, m.Keys)
	writeEvents(w, events, now)
}

// writeKeys lists keys and the sizes of their values, never the values.
func writeKeys(w io.Writer, keys []api.ConfigKey) {
	section(w, "Data")
	if len(keys) == 0 {
		fmt.Fprintln(w, "  <none>")
		return
	}
	t := newTable(w, "  KEY", "SIZE")
	for _, k := range keys {
		size := fmt.Sprintf("%d bytes", k.Size)
		if k.Binary {
			size += " (binary)"
		}
		t.row("  "+k.Key, size)
	}
	t.flush()
}

// resultObject names an apply result as kubectl does: kind/namespace/name.
func resultObject(r api.ApplyResult) string {
	kind := strings.ToLower(r.Kind)
	if kind == "" {
		kind = strings.ToLower(schema.KindDaemonSet)
	}
	return kind + "/" + r.Key
}

// printConfigDiff prints a config object's change: a ConfigMap's changed
// keys with their values, a Secret's changed keys with sizes only.
func printConfigDiff(ctx context.Context, c *api.Client, w io.Writer, r api.ApplyResult, obj schema.Object) error {
	fmt.Fprintf(w, "%s %s\n", resultObject(r), r.Action)
	var lines []string
	switch {
	case obj.ConfigMap != nil:
		var live api.ConfigMap
		if r.Action != api.ActionCreated {
			var err error
			if live, err = c.GetConfigMap(ctx, r.Key); err != nil {
				return fmt.Errorf("diff %s: %w", r.Key, err)
			}
		}
		lines = configMapDiff(live, obj.ConfigMap)
	case obj.Secret != nil:
		var live api.Secret
		if r.Action != api.ActionCreated {
			var err error
			if live, err = c.GetSecret(ctx, r.Key, false); err != nil {
				return fmt.Errorf("diff %s: %w", r.Key, err)
			}
		}
		lines = secretDiff(live.Keys, obj.Secret)
	}
	for _, l := range lines {
		fmt.Fprintf(w, "  %s\n", l)
	}
	return nil
}

// configMapDiff lists "- data.KEY: old" / "+ data.KEY: new" for every key
// that differs (binary values by size).
func configMapDiff(live api.ConfigMap, next *schema.ConfigMap) []string {
	before, after := map[string]string{}, map[string]string{}
	for k, v := range live.Data {
		before["data."+k] = strconv.Quote(v)
	}
	for k, v := range live.BinaryData {
		before["binaryData."+k] = fmt.Sprintf("<%d bytes>", len(v))
	}
	for k, v := range next.Data {
		after["data."+k] = strconv.Quote(v)
	}
	for k, v := range next.BinaryData {
		after["binaryData."+k] = fmt.Sprintf("<%d bytes>", len(v))
	}
	return fieldDiff(before, after)
}

// secretDiff lists the keys added, removed or resized, by size only; a
// value changed at the same size shows as "values changed (not shown)".
func secretDiff(live []api.ConfigKey, next *schema.Secret) []string {
	before, after := map[string]string{}, map[string]string{}
	for _, k := range live {
		before["data."+k.Key] = fmt.Sprintf("<%d bytes>", k.Size)
	}
	for k, v := range next.Data {
		after["data."+k] = fmt.Sprintf("<%d bytes>", len(v))
	}
	for k, v := range next.StringData {
		after["data."+k] = fmt.Sprintf("<%d bytes>", len(v))
	}
	if lines := fieldDiff(before, after); len(lines) > 0 {
		return lines
	}
	return []string{"values changed (not shown)"}
}

// configUses lists a template's config references as configmap/NAME and
// secret/NAME.
func configUses(refs schema.ConfigRefs) []string {
	var out []string
	for _, n := range refs.ConfigMaps {
		out = append(out, kindConfigMap+"/"+n)
	}
	for _, n := range refs.Secrets {
		out = append(out, kindSecret+"/"+n)
	}
	return out
}
