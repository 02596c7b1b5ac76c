package controller

import (
	"encoding/json"

	"github.com/edgeset/edgeset/controller/rollout"
	"github.com/edgeset/edgeset/controller/store"
)

// A rollout state is stored as its head and one entry per node
// (store.PutRolloutParts), so that a pass writes the entries its step
// changed (rollout.Delta.Changed) and not the whole state, which holds an
// entry for every node the rollout touched.

// loadRollout reads daemonset key's stored rollout state: its head and
// every node's entry. found is false when there is none. whole reports a
// record written before states were stored in parts, its maps in its head:
// they load as they are, and the next write must replace the record.
func loadRollout(s *store.Store, key string) (st rollout.State, found, whole bool, err error) {
	type nodeEntry struct {
		node  string
		entry rollout.NodeEntry
	}
	var entries []nodeEntry
	found, err = s.GetRolloutParts(key, &st, func(node string, raw []byte) error {
		var e rollout.NodeEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			return err
		}
		entries = append(entries, nodeEntry{node, e})
		return nil
	})
	if err != nil || !found {
		return rollout.State{}, false, false, err
	}
	whole = st.HasEntries()
	for _, e := range entries {
		st.SetEntry(e.node, e.entry)
	}
	return st, true, whole, nil
}

// putRolloutTxn stores daemonset key's rollout state st within tx: its head
// and the entries of the nodes changed, or, with replace, the whole state
// (every entry, the stored ones dropped first).
func putRolloutTxn(tx *store.Txn, key string, st rollout.State, changed []string, replace bool) error {
	if replace {
		changed = st.EntryNodes()
	}
	entries := make(map[string]any, len(changed))
	for _, node := range changed {
		entries[node] = nil // deleted, unless it has an entry
		if e, ok := st.Entry(node); ok {
			entries[node] = e
		}
	}
	return tx.PutRolloutParts(key, st.Head(), entries, replace)
}
