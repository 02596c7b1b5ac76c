package schema

import (
	"fmt"
	"path"
	"strings"
	"time"
)

// The device-side update lock (docs/rollouts.md, "Update locks"). A
// daemon whose pod template carries UpdateLockAnnotation finds a directory
// of its instance's own mounted at UpdateLockDir in every container; while
// the file UpdateLockFile exists there, the agent does not replace the
// instance with another revision, and the rollout moves on to other nodes.
const (
	// UpdateLockAnnotation opts a pod template into the update lock. Its
	// value must be "true". It is template metadata, so an apps/v1
	// manifest keeps its Kubernetes meaning (Kubernetes ignores it), and
	// turning it on or off is a new revision: it changes the containers'
	// mounts.
	UpdateLockAnnotation = "edgeset.io/update-lock"
	// UpdateLockDir is where the agent mounts the instance's lock
	// directory (read-write) in each of its containers.
	UpdateLockDir = "/run/edgeset"
	// UpdateLockFile is the lock: held while it exists.
	UpdateLockFile = UpdateLockDir + "/updates.lock"
	// DefaultUpdateLockStaleAfter is how long a lock may be held before it
	// is reported stale, when spec.rollout.updateLockStaleAfterSeconds is
	// not set.
	DefaultUpdateLockStaleAfter = time.Hour
)

// UpdateLockEnabled reports whether the template opts into the update
// lock.
func (t *PodTemplateSpec) UpdateLockEnabled() bool {
	return t.Metadata.Annotations[UpdateLockAnnotation] == "true"
}

// UpdateLockStatus is an instance's update lock as its agent reports it
// (InstanceStatus.UpdateLock): present while the lock is held, or while an
// update the lock deferred waits for the controller's answer.
type UpdateLockStatus struct {
	// HeldSince is when the lock was taken: the lock file's modification
	// time on the device's clock.
	HeldSince time.Time `json:"heldSince"`
	// Deferred: the agent was asked to replace the instance (or to start
	// a surge pair beside it) and deferred that because of the lock. It
	// does not act on that request even once the lock is released, and
	// keeps reporting the lock, until the controller changes what it asks
	// of the daemonset (the controller then gives the node's place in the
	// rollout back and asks it to keep the instance).
	Deferred bool `json:"deferred,omitempty"`
}

// FormatLockInstant is the wire form of an update lock override
// (DesiredInstance.OverrideUpdateLock): RFC 3339 with nanoseconds, UTC.
func FormatLockInstant(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// ParseLockInstant reads DesiredInstance.OverrideUpdateLock.
func ParseLockInstant(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }

// validateUpdateLock checks the annotation's value and that no container
// mounts a volume where the lock directory goes.
func validateUpdateLock(errs *fieldErrors, field string, t *PodTemplateSpec) {
	v, ok := t.Metadata.Annotations[UpdateLockAnnotation]
	if !ok {
		return
	}
	if v != "true" {
		errs.add(field+".metadata.annotations["+UpdateLockAnnotation+"]", "unsupported value %q: want \"true\" (remove the annotation to opt out)", v)
		return
	}
	check := func(kind string, cs []Container) {
		for i, c := range cs {
			for j, m := range c.VolumeMounts {
				if p := path.Clean(m.MountPath); p == UpdateLockDir || strings.HasPrefix(p, UpdateLockDir+"/") {
					errs.add(fmt.Sprintf("%s.spec.%s[%d].volumeMounts[%d].mountPath", field, kind, i, j),
						"%s is where the update lock directory is mounted (annotation %s)", m.MountPath, UpdateLockAnnotation)
				}
			}
		}
	}
	check("containers", t.Spec.Containers)
	check("initContainers", t.Spec.InitContainers)
}

// validateUpdateLockStatus checks a reported lock.
func validateUpdateLockStatus(errs *fieldErrors, field string, l *UpdateLockStatus) {
	if l != nil && l.HeldSince.IsZero() {
		errs.add(field+".heldSince", "required")
	}
}
