package schema

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Downward API field paths, as in Kubernetes: envFieldPaths may be read by
// environment variables, volumeFieldPaths by downwardAPI volume files.
// Both also accept metadata.labels['k'] and metadata.annotations['k'], and
// under edgeset.io/v1 node.labels['k'].
var (
	envFieldPaths = []string{
		"metadata.name", "metadata.namespace", "metadata.uid",
		"spec.nodeName", "spec.serviceAccountName",
		"status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs",
	}
	volumeFieldPaths = []string{
		"metadata.name", "metadata.namespace", "metadata.uid",
		"metadata.labels", "metadata.annotations",
	}
	// resourceFieldNames are the resources a resourceFieldRef may read.
	resourceFieldNames = []string{
		"limits.cpu", "limits.memory", "limits.ephemeral-storage",
		"requests.cpu", "requests.memory", "requests.ephemeral-storage",
	}
)

// NodeLabelsFieldPath is edgeset's downward API extension (edgeset.io/v1
// only): node.labels['k'] reads the label k of the node the instance runs
// on.
const NodeLabelsFieldPath = "node.labels"

// SplitFieldPath splits a subscripted downward API path such as
// metadata.labels['app'] into "metadata.labels" and "app"; a path without
// a subscript comes back whole with ok false.
func SplitFieldPath(fieldPath string) (base, key string, ok bool) {
	if !strings.HasSuffix(fieldPath, "']") {
		return fieldPath, "", false
	}
	i := strings.Index(fieldPath, "['")
	if i < 0 {
		return fieldPath, "", false
	}
	return fieldPath[:i], fieldPath[i+2 : len(fieldPath)-2], true
}

// validateFieldRef checks a downward API field selector of an env var
// (volume false) or of a downwardAPI volume file.
func (pc *podCheck) validateFieldRef(field string, sel *ObjectFieldSelector, volume bool) {
	if sel.APIVersion != "" && sel.APIVersion != "v1" {
		pc.add(field+".apiVersion", "unsupported apiVersion %q: want v1", sel.APIVersion)
	}
	pf := field + ".fieldPath"
	base, key, subscripted := SplitFieldPath(sel.FieldPath)
	if subscripted {
		pc.validateSubscript(pf, base, key)
		return
	}
	allowed := envFieldPaths
	if volume {
		allowed = volumeFieldPaths
	}
	switch {
	case sel.FieldPath == "":
		pc.add(pf, "required")
	case !slices.Contains(allowed, sel.FieldPath):
		pc.add(pf, "unsupported fieldPath %q%s: want one of %s, metadata.labels['<key>'], metadata.annotations['<key>']%s",
			sel.FieldPath, unsupportedWhere(sel.FieldPath, volume), strings.Join(allowed, ", "), pc.nodeLabelsHint())
	}
}

// unsupportedWhere explains a path that Kubernetes allows elsewhere.
func unsupportedWhere(fieldPath string, volume bool) string {
	switch {
	case volume && slices.Contains(envFieldPaths, fieldPath):
		return " in a downwardAPI volume (Kubernetes allows it only in env)"
	case !volume && slices.Contains(volumeFieldPaths, fieldPath):
		return " in env (Kubernetes allows it only in a downwardAPI volume; use a subscript such as metadata.labels['app'])"
	}
	return ""
}

func (pc *podCheck) nodeLabelsHint() string {
	if pc.nodeLabels {
		return ", node.labels['<key>']"
	}
	return ""
}

// validateSubscript checks metadata.labels['k'], metadata.annotations['k']
// and node.labels['k'].
func (pc *podCheck) validateSubscript(field, base, key string) {
	switch base {
	case "metadata.labels", NodeLabelsFieldPath:
		if base == NodeLabelsFieldPath && !pc.nodeLabels {
			pc.add(field, "node.labels['%s'] is edgeset's extension of the downward API: only allowed with apiVersion %s, not %s", key, APIVersionEdgeset, APIVersionApps)
			return
		}
		if p := LabelKeyProblem(key); p != "" {
			pc.add(field, "%s", p)
		}
	case "metadata.annotations":
		if p := LabelKeyProblem(strings.ToLower(key)); p != "" {
			pc.add(field, "%s", strings.Replace(p, "label key", "annotation key", 1))
		}
	default:
		pc.add(field, "unsupported subscript on %q: only metadata.labels['<key>'] and metadata.annotations['<key>']%s take one", base, pc.nodeLabelsHint())
	}
}

// validateResourceRef checks a resourceFieldRef; in a volume (volume true)
// containerName is required.
func (pc *podCheck) validateResourceRef(field string, r *ResourceFieldSelector, volume bool) {
	switch {
	case r.ContainerName == "" && volume:
		pc.add(field+".containerName", "required in a downwardAPI volume")
	case r.ContainerName != "" && !pc.containers[r.ContainerName]:
		pc.add(field+".containerName", "no container named %q in this pod", r.ContainerName)
	}
	if !slices.Contains(resourceFieldNames, r.Resource) {
		pc.add(field+".resource", "unsupported resource %q: want one of %s", r.Resource, strings.Join(resourceFieldNames, ", "))
		return
	}
	if r.Divisor != nil {
		validateDivisor(pc.errs, field+".divisor", r.Resource, *r.Divisor)
	}
}

// cpuDivisors and byteDivisors are the divisors Kubernetes accepts.
var (
	cpuDivisors  = []string{"1m", "1"}
	byteDivisors = []string{"1", "1k", "1M", "1G", "1T", "1P", "1E", "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei"}
)

func validateDivisor(errs *fieldErrors, field, resource string, d Quantity) {
	m, err := d.MilliValue()
	if err != nil {
		errs.add(field, "%v", err)
		return
	}
	allowed := byteDivisors
	if strings.HasSuffix(resource, ".cpu") {
		allowed = cpuDivisors
	}
	for _, a := range allowed {
		if am, _ := Quantity(a).MilliValue(); am == m {
			return
		}
	}
	errs.add(field, "unsupported divisor %q for %s: want one of %s", d, resource, strings.Join(allowed, ", "))
}

// validateVolumes checks the pod's volumes and records them by name.
func (pc *podCheck) validateVolumes() {
	for i := range pc.spec.Volumes {
		v := &pc.spec.Volumes[i]
		vf := fmt.Sprintf("%s.volumes[%d]", pc.field, i)
		switch {
		case v.Name == "":
			pc.add(vf+".name", "required")
		case !IsDNS1123Label(v.Name):
			pc.add(vf+".name", "invalid volume name %q: must be a DNS-1123 label", v.Name)
		case pc.volumes[v.Name] != nil:
			pc.add(vf+".name", "duplicate volume name %q", v.Name)
		}
		if pc.volumes[v.Name] == nil {
			pc.volumes[v.Name] = v
		}
		pc.validateVolume(vf, v)
	}
}

// volumeSourceNames lists the sources set on v.
func volumeSourceNames(v *Volume) []string {
	var names []string
	for _, s := range []struct {
		name string
		set  bool
	}{
		{"hostPath", v.HostPath != nil}, {"emptyDir", v.EmptyDir != nil}, {"configMap", v.ConfigMap != nil},
		{"secret", v.Secret != nil}, {"projected", v.Projected != nil}, {"downwardAPI", v.DownwardAPI != nil},
	} {
		if s.set {
			names = append(names, s.name)
		}
	}
	return names
}

func (pc *podCheck) validateVolume(vf string, v *Volume) {
	if srcs := volumeSourceNames(v); len(srcs) > 1 {
		pc.add(vf, "must have exactly one volume source, has %d (%s)", len(srcs), strings.Join(srcs, ", "))
	}
	if h := v.HostPath; h != nil {
		switch {
		case h.Path == "":
			pc.add(vf+".hostPath.path", "required")
		case !path.IsAbs(h.Path):
			pc.add(vf+".hostPath.path", "must be an absolute path, not %q", h.Path)
		case slices.Contains(strings.Split(h.Path, "/"), ".."):
			// As Kubernetes: the kernel resolves "link/.." to the parent
			// of link's target, not where a lexical clean puts it.
			pc.add(vf+".hostPath.path", "must not contain '..', not %q", h.Path)
		}
		validateHostPathType(pc.errs, vf+".hostPath.type", h.Type)
	}
	if e := v.EmptyDir; e != nil {
		validateEmptyDir(pc.errs, vf+".emptyDir", e)
	}
	paths := map[string]string{}
	if c := v.ConfigMap; c != nil {
		validateObjectName(pc.errs, vf+".configMap.name", "configmap", c.Name)
		validateItems(pc.errs, vf+".configMap.items", c.Items, paths)
		validateMode(pc.errs, vf+".configMap.defaultMode", c.DefaultMode)
	}
	if s := v.Secret; s != nil {
		validateObjectName(pc.errs, vf+".secret.secretName", "secret", s.SecretName)
		validateItems(pc.errs, vf+".secret.items", s.Items, paths)
		validateMode(pc.errs, vf+".secret.defaultMode", s.DefaultMode)
	}
	if d := v.DownwardAPI; d != nil {
		pc.validateDownwardFiles(vf+".downwardAPI.items", d.Items, paths)
		validateMode(pc.errs, vf+".downwardAPI.defaultMode", d.DefaultMode)
	}
	if p := v.Projected; p != nil {
		pc.validateProjected(vf+".projected", p)
	}
}

// hostPathTypes are the Kubernetes hostPath types.
var hostPathTypes = []string{HostPathUnset, HostPathDirectoryOrCreate, HostPathDirectory, HostPathFileOrCreate,
	HostPathFile, HostPathSocket, HostPathCharDevice, HostPathBlockDevice}

func validateHostPathType(errs *fieldErrors, field, typ string) {
	if !slices.Contains(hostPathTypes, typ) {
		errs.add(field, "unsupported type %q: want one of %s", typ, strings.Join(hostPathTypes[1:], ", "))
	}
}

func validateEmptyDir(errs *fieldErrors, field string, e *EmptyDirVolumeSource) {
	switch e.Medium {
	case StorageMediumDefault, StorageMediumMemory:
	default:
		errs.add(field+".medium", "unsupported medium %q: want \"\" (the device's disk) or Memory (a tmpfs)", e.Medium)
	}
	if e.SizeLimit == nil {
		return
	}
	switch v, err := e.SizeLimit.Value(); {
	case err != nil:
		errs.add(field+".sizeLimit", "%v", err)
	case v <= 0:
		errs.add(field+".sizeLimit", "must be greater than 0, not %q", *e.SizeLimit)
	}
}

// validateMode requires a file mode between 0 and 0777.
func validateMode(errs *fieldErrors, field string, mode *int32) {
	if mode != nil && (*mode < 0 || *mode > 0o777) {
		errs.add(field, "must be a file mode between 0 and 0777 (octal; 511 in decimal), not %d", *mode)
	}
}

// validateItemPath checks one file path of a volume and that no other item
// of the volume (recorded in paths) has it.
func validateItemPath(errs *fieldErrors, field, p string, paths map[string]string) {
	if p == "" {
		errs.add(field, "required")
		return
	}
	validateRelativePath(errs, field, p, true)
	clean := path.Clean(p)
	if other, dup := paths[clean]; dup {
		errs.add(field, "duplicate path %q in this volume (also %s)", p, other)
		return
	}
	paths[clean] = field
}

func validateItems(errs *fieldErrors, field string, items []KeyToPath, paths map[string]string) {
	for i, it := range items {
		f := fmt.Sprintf("%s[%d]", field, i)
		if p := ConfigKeyProblem(it.Key); p != "" {
			errs.add(f+".key", "%s", p)
		}
		validateItemPath(errs, f+".path", it.Path, paths)
		validateMode(errs, f+".mode", it.Mode)
	}
}

func (pc *podCheck) validateDownwardFiles(field string, files []DownwardAPIVolumeFile, paths map[string]string) {
	for i := range files {
		file := &files[i]
		f := fmt.Sprintf("%s[%d]", field, i)
		validateItemPath(pc.errs, f+".path", file.Path, paths)
		validateMode(pc.errs, f+".mode", file.Mode)
		switch {
		case file.FieldRef != nil && file.ResourceFieldRef != nil:
			pc.add(f, "must have exactly one of fieldRef and resourceFieldRef, has both")
		case file.FieldRef != nil:
			pc.validateFieldRef(f+".fieldRef", file.FieldRef, true)
		case file.ResourceFieldRef != nil:
			pc.validateResourceRef(f+".resourceFieldRef", file.ResourceFieldRef, true)
		default:
			pc.add(f, "must have exactly one of fieldRef and resourceFieldRef, has none")
		}
	}
}

func (pc *podCheck) validateProjected(field string, p *ProjectedVolumeSource) {
	validateMode(pc.errs, field+".defaultMode", p.DefaultMode)
	paths := map[string]string{}
	for i, src := range p.Sources {
		sf := fmt.Sprintf("%s.sources[%d]", field, i)
		n := 0
		if c := src.ConfigMap; c != nil {
			n++
			validateObjectName(pc.errs, sf+".configMap.name", "configmap", c.Name)
			validateItems(pc.errs, sf+".configMap.items", c.Items, paths)
		}
		if s := src.Secret; s != nil {
			n++
			validateObjectName(pc.errs, sf+".secret.name", "secret", s.Name)
			validateItems(pc.errs, sf+".secret.items", s.Items, paths)
		}
		if d := src.DownwardAPI; d != nil {
			n++
			pc.validateDownwardFiles(sf+".downwardAPI.items", d.Items, paths)
		}
		if n != 1 {
			pc.add(sf, "must have exactly one source (configMap, secret or downwardAPI), has %d", n)
		}
	}
}
