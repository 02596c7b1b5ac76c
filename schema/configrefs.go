package schema

import "slices"

// ConfigRefs are the names of the ConfigMaps and Secrets a pod template
// references (in its own namespace), each sorted and unique: volumes
// (configMap, secret, projected sources), env valueFrom and envFrom of
// init and main containers, and imagePullSecrets.
type ConfigRefs struct {
	ConfigMaps []string
	Secrets    []string
}

// References returns the ConfigMaps and Secrets the template references.
func (t *PodTemplateSpec) References() ConfigRefs {
	cms, secrets := map[string]bool{}, map[string]bool{}
	for _, v := range t.Spec.Volumes {
		volumeRefs(v, cms, secrets)
	}
	for _, cs := range [][]Container{t.Spec.InitContainers, t.Spec.Containers} {
		for _, c := range cs {
			containerRefs(c, cms, secrets)
		}
	}
	for _, s := range t.Spec.ImagePullSecrets {
		secrets[s.Name] = true
	}
	return ConfigRefs{ConfigMaps: sortedSet(cms), Secrets: sortedSet(secrets)}
}

func volumeRefs(v Volume, cms, secrets map[string]bool) {
	if v.ConfigMap != nil {
		cms[v.ConfigMap.Name] = true
	}
	if v.Secret != nil {
		secrets[v.Secret.SecretName] = true
	}
	if v.Projected == nil {
		return
	}
	for _, src := range v.Projected.Sources {
		if src.ConfigMap != nil {
			cms[src.ConfigMap.Name] = true
		}
		if src.Secret != nil {
			secrets[src.Secret.Name] = true
		}
	}
}

func containerRefs(c Container, cms, secrets map[string]bool) {
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			continue
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			cms[r.Name] = true
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			secrets[r.Name] = true
		}
	}
	for _, e := range c.EnvFrom {
		if e.ConfigMapRef != nil {
			cms[e.ConfigMapRef.Name] = true
		}
		if e.SecretRef != nil {
			secrets[e.SecretRef.Name] = true
		}
	}
}

func sortedSet(m map[string]bool) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		if k != "" {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
