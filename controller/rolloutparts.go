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
	entries := 0
	found, err = s.GetRolloutParts(key, &st, func(node string, raw []byte) error {
		if entries == 0 {
			whole = st.HasEntries() // the head, decoded before its entries
		}
		entries++
		var e rollout.NodeEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			return err
		}
		st.SetEntry(node, e)
		return nil
	})
	if err != nil || !found {
		return rollout.State{}, false, false, err
	}
	if entries == 0 {
		whole = st.HasEntries()
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
	entries := make([]store.RolloutEntry, len(changed))
	for k, node := range changed {
		entries[k].Node = node
		if e, ok := st.Entry(node); ok {
			entries[k].Value = e
		} // else deleted
	}
	return tx.PutRolloutParts(key, st.Head(), entries, replace)
}
