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
	return ds, nil
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
