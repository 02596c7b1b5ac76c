package reconcile

import (
	"cmp"
	"slices"
	"strings"

	"github.com/edgeset/edgeset/schema"
)

// appendObjects appends to cms and secrets the existing ConfigMaps and
// Secrets that instances reference and returns them sorted by namespace
// and name, unique. It allocates only to grow cms or secrets.
func (c Configs) appendObjects(cms, secrets []schema.ObjectRef, instances []schema.DesiredInstance) ([]schema.ObjectRef, []schema.ObjectRef) {
	for _, in := range instances {
		refs, ok := c.Refs[in.Revision]
		if !ok {
			continue
		}
		ns := namespaceOf(in.DaemonSet)
		cms = appendExisting(cms, ns, refs.ConfigMaps, c.ConfigMaps)
		secrets = appendExisting(secrets, ns, refs.Secrets, c.Secrets)
	}
	return sortedRefs(cms), sortedRefs(secrets)
}

// cloneRefs returns a copy of refs, nil when refs is empty.
func cloneRefs(refs []schema.ObjectRef) []schema.ObjectRef {
	if len(refs) == 0 {
		return nil
	}
	return slices.Clone(refs)
}

// namespaceOf returns the namespace of a "namespace/name" daemonset key.
func namespaceOf(key string) string {
	ns, _, _ := strings.Cut(key, "/")
	return ns
}

// appendExisting appends a reference to each of names (in namespace ns)
// that hashes holds.
func appendExisting(dst []schema.ObjectRef, ns string, names []string, hashes map[string]string) []schema.ObjectRef {
	for _, name := range names {
		if h, ok := hashes[ns+"/"+name]; ok {
			dst = append(dst, schema.ObjectRef{Namespace: ns, Name: name, Hash: h})
		}
	}
	return dst
}

func compareRefs(a, b schema.ObjectRef) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}

func sortedRefs(refs []schema.ObjectRef) []schema.ObjectRef {
	slices.SortFunc(refs, compareRefs)
	return slices.Compact(refs)
}
