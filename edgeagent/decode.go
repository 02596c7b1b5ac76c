package edgeagent

import (
	"fmt"

	"github.com/edgeset/edgeset/schema"
)

// decodeDesiredState parses and checks a desired-state payload with the
// schema's strict wire decoder, and also rejects an instance listed twice.
func decodeDesiredState(b []byte) (schema.DesiredState, error) {
	ds, err := schema.DecodeDesiredState(b)
	if err != nil {
		return schema.DesiredState{}, fmt.Errorf("decode desired state: %w", err)
	}
	seen := make(map[instanceKey]bool, len(ds.Instances))
	for i, in := range ds.Instances {
		if seen[in] {
			return schema.DesiredState{}, fmt.Errorf("decode desired state: instances[%d]: duplicate %s revision %s", i, in.DaemonSet, in.Revision)
		}
		seen[in] = true
	}
	if err := checkObjectRefs("configMaps", ds.ConfigMaps); err != nil {
		return schema.DesiredState{}, fmt.Errorf("decode desired state: %w", err)
	}
	if err := checkObjectRefs("secrets", ds.Secrets); err != nil {
		return schema.DesiredState{}, fmt.Errorf("decode desired state: %w", err)
	}
	return ds, nil
}

// checkObjectRefs requires each reference to name an object and carry a
// content hash (20 lowercase hex digits): the hash becomes one level of a
// topic the agent subscribes to, so it must never be a wildcard.
func checkObjectRefs(field string, refs []schema.ObjectRef) error {
	for i, r := range refs {
		switch {
		case r.Namespace == "" || r.Name == "":
			return fmt.Errorf("%s[%d]: namespace and name are required", field, i)
		case !isContentHash(r.Hash):
			return fmt.Errorf("%s[%d].hash: %q is not a content hash", field, i, r.Hash)
		}
	}
	return nil
}

func isContentHash(h string) bool {
	if len(h) != 20 {
		return false
	}
	for _, c := range h {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// decodeRevision parses a revision payload, validates its template and
// verifies its content hash (schema.DecodeRevision).
func decodeRevision(b []byte) (schema.Revision, error) {
	rev, err := schema.DecodeRevision(b)
	if err != nil {
		return schema.Revision{}, fmt.Errorf("decode revision: %w", err)
	}
	return rev, nil
}

// instanceKey identifies one instance: a daemonset and one of its revisions.
type instanceKey = schema.DesiredInstance
