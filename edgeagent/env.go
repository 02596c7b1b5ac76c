package edgeagent

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/edgeset/edgeset/schema"
)

// envBuilder accumulates a container's environment in Kubernetes' order:
// envFrom sources first, then env, a later definition of a name replacing
// an earlier one. Values are kept in the order names were first defined.
type envBuilder struct {
	vars  map[string]string
	order []string
}

func (b *envBuilder) set(name, value string) {
	if _, ok := b.vars[name]; !ok {
		b.order = append(b.order, name)
	}
	b.vars[name] = value
}

func (b *envBuilder) list() []string {
	if len(b.order) == 0 {
		return nil
	}
	out := make([]string, len(b.order))
	for i, k := range b.order {
		out[i] = k + "=" + b.vars[k]
	}
	return out
}

// envVarName is Kubernetes' IsEnvVarName.
var envVarName = regexp.MustCompile(`^[-._a-zA-Z][-._a-zA-Z0-9]*$`)

// envResolver resolves the environment of the containers of one instance.
type envResolver struct {
	ic     InstanceContext
	fields podFields
	spec   schema.PodSpec
}

// resolve returns c's environment as KEY=VALUE in definition order, and
// the expansion of the final variables (for $(VAR) in command, args and
// subPathExpr), with what is left of the container's budget. A missing
// non-optional ConfigMap, Secret or key is a *ConfigError with the
// kubelet's message; other errors name the field under path.
func (r envResolver) resolve(path string, c schema.Container) ([]string, *expansion, error) {
	b := &envBuilder{vars: map[string]string{}}
	x := newExpansion(b.vars)
	for i, src := range c.EnvFrom {
		if err := r.envFrom(b, x, src); err != nil {
			return nil, nil, wrapField(fmt.Sprintf("%s.envFrom[%d]", path, i), err)
		}
	}
	for i, e := range c.Env {
		v, skip, err := r.value(c, e, x)
		if err != nil {
			return nil, nil, wrapField(fmt.Sprintf("%s.env[%d] (%s)", path, i, e.Name), err)
		}
		if skip {
			continue
		}
		if err := x.charge(len(e.Name) + 1 + len(v)); err != nil {
			return nil, nil, fmt.Errorf("%s.env[%d] (%s): %w", path, i, e.Name, err)
		}
		b.set(e.Name, v)
	}
	return b.list(), x, nil
}

// wrapField prefixes err with the field path, except a *ConfigError,
// which keeps Kubernetes' wording; nil stays nil.
func wrapField(path string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*ConfigError); ok {
		return err
	}
	return fmt.Errorf("%s: %w", path, err)
}

func (r envResolver) envFrom(b *envBuilder, x *expansion, src schema.EnvFromSource) error {
	set := func(name, value string) error {
		if err := x.charge(len(name) + 1 + len(value)); err != nil {
			return err
		}
		b.set(name, value)
		return nil
	}
	switch {
	case src.ConfigMapRef != nil:
		cm, ok := r.ic.ConfigMaps[src.ConfigMapRef.Name]
		if !ok {
			if isTrue(src.ConfigMapRef.Optional) {
				return nil
			}
			return configMapNotFound(src.ConfigMapRef.Name)
		}
		for _, k := range sortedKeys(cm.Data) {
			if !envVarName.MatchString(src.Prefix + k) {
				continue
			}
			if err := set(src.Prefix+k, cm.Data[k]); err != nil {
				return err
			}
		}
	case src.SecretRef != nil:
		s, ok := r.ic.Secrets[src.SecretRef.Name]
		if !ok {
			if isTrue(src.SecretRef.Optional) {
				return nil
			}
			return secretNotFound(src.SecretRef.Name)
		}
		for _, k := range sortedKeys(s.Data) {
			if !envVarName.MatchString(src.Prefix + k) {
				continue
			}
			if err := set(src.Prefix+k, string(s.Data[k])); err != nil {
				return err
			}
		}
	}
	return nil
}

// value resolves one env entry; skip is set when an optional source is
// absent, which leaves the variable undefined, as in Kubernetes.
func (r envResolver) value(c schema.Container, e schema.EnvVar, defined *expansion) (v string, skip bool, err error) {
	if e.Value != "" || e.ValueFrom == nil {
		v, err = defined.expand(e.Value)
		return v, false, err
	}
	src := e.ValueFrom
	switch {
	case src.FieldRef != nil:
		v, err = r.fields.fieldValue(src.FieldRef.FieldPath)
		return v, false, wrapField("valueFrom.fieldRef", err)
	case src.ResourceFieldRef != nil:
		v, err = resourceValue(*src.ResourceFieldRef, c, r.spec, r.ic.Allocatable)
		return v, false, wrapField("valueFrom.resourceFieldRef", err)
	case src.ConfigMapKeyRef != nil:
		return r.configMapKey(*src.ConfigMapKeyRef)
	case src.SecretKeyRef != nil:
		return r.secretKey(*src.SecretKeyRef)
	}
	return "", false, nil
}

func (r envResolver) configMapKey(ref schema.ConfigMapKeySelector) (string, bool, error) {
	optional := isTrue(ref.Optional)
	cm, ok := r.ic.ConfigMaps[ref.Name]
	if !ok {
		if optional {
			return "", true, nil
		}
		return "", false, configMapNotFound(ref.Name)
	}
	v, ok := cm.Data[ref.Key]
	if !ok {
		if optional {
			return "", true, nil
		}
		return "", false, &ConfigError{Message: fmt.Sprintf("couldn't find key %s in ConfigMap %s/%s", ref.Key, r.ic.Namespace(), ref.Name)}
	}
	return v, false, nil
}

func (r envResolver) secretKey(ref schema.SecretKeySelector) (string, bool, error) {
	optional := isTrue(ref.Optional)
	s, ok := r.ic.Secrets[ref.Name]
	if !ok {
		if optional {
			return "", true, nil
		}
		return "", false, secretNotFound(ref.Name)
	}
	v, ok := s.Data[ref.Key]
	if !ok {
		if optional {
			return "", true, nil
		}
		return "", false, &ConfigError{Message: fmt.Sprintf("couldn't find key %s in Secret %s/%s", ref.Key, r.ic.Namespace(), ref.Name)}
	}
	return string(v), false, nil
}

func configMapNotFound(name string) *ConfigError {
	return &ConfigError{Message: fmt.Sprintf("configmap %q not found", name)}
}

func secretNotFound(name string) *ConfigError {
	return &ConfigError{Message: fmt.Sprintf("secret %q not found", name)}
}

func isTrue(b *bool) bool { return b != nil && *b }

// resourceValue is the kubelet's containerResourceRuntimeValue: the
// selected request or limit of the named container (c itself when
// ContainerName is empty), divided by the divisor and rounded up (CPU at
// milli-CPU precision). An unset limit is the node's allocatable amount;
// an unset request is the explicit limit, else 0.
func resourceValue(sel schema.ResourceFieldSelector, c schema.Container, spec schema.PodSpec, allocatable schema.ResourceList) (string, error) {
	if sel.ContainerName != "" && sel.ContainerName != c.Name {
		found, ok := containerNamed(spec, sel.ContainerName)
		if !ok {
			return "", fmt.Errorf("containerName: no container %q", sel.ContainerName)
		}
		c = found
	}
	kind, res, ok := splitResource(sel.Resource)
	if !ok {
		return "", fmt.Errorf("resource: unsupported %q", sel.Resource)
	}
	q, ok := c.Resources.Limits[res]
	if kind == "requests" {
		if rq, has := c.Resources.Requests[res]; has {
			q, ok = rq, true
		}
	} else if !ok {
		q, ok = allocatable[res]
	}
	if !ok {
		q = "0"
	}
	divisor := schema.Quantity("1")
	if sel.Divisor != nil && *sel.Divisor != "" {
		divisor = *sel.Divisor
	}
	return divideCeil(q, divisor, res == "cpu")
}

func containerNamed(spec schema.PodSpec, name string) (schema.Container, bool) {
	for _, cs := range [][]schema.Container{spec.Containers, spec.InitContainers} {
		for _, c := range cs {
			if c.Name == name {
				return c, true
			}
		}
	}
	return schema.Container{}, false
}

// splitResource splits "limits.cpu" into ("limits", "cpu").
func splitResource(s string) (kind, res string, ok bool) {
	for _, k := range []string{"limits", "requests"} {
		if r, found := cutPrefixDot(s, k); found {
			switch r {
			case "cpu", "memory", "ephemeral-storage":
				return k, r, true
			}
			if len(r) > len("hugepages-") && r[:len("hugepages-")] == "hugepages-" {
				return k, r, true
			}
		}
	}
	return "", "", false
}

func cutPrefixDot(s, prefix string) (string, bool) {
	if len(s) > len(prefix)+1 && s[:len(prefix)] == prefix && s[len(prefix)] == '.' {
		return s[len(prefix)+1:], true
	}
	return "", false
}

// divideCeil returns ceil(q/divisor) as the kubelet computes it: in
// milli-units for CPU, in whole units otherwise.
func divideCeil(q, divisor schema.Quantity, milli bool) (string, error) {
	value, scale := schema.Quantity.Value, schema.Quantity.Value
	if milli {
		value, scale = schema.Quantity.MilliValue, schema.Quantity.MilliValue
	}
	n, err := value(q)
	if err != nil {
		return "", fmt.Errorf("quantity %q: %w", string(q), err)
	}
	d, err := scale(divisor)
	if err != nil {
		return "", fmt.Errorf("divisor %q: %w", string(divisor), err)
	}
	if d <= 0 {
		return "", fmt.Errorf("divisor %q: must be positive", string(divisor))
	}
	out := n / d
	if n%d != 0 && n > 0 {
		out++
	}
	return strconv.FormatInt(out, 10), nil
}
