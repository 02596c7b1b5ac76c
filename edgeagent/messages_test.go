package edgeagent

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

// flakyStore fails saveDesired while fail is set.
type flakyStore struct {
	stateStore
	fail bool
}

func (s *flakyStore) saveDesired(ds schema.DesiredState) error {
	if s.fail {
		return errors.New("disk full")
	}
	return s.stateStore.saveDesired(ds)
}

func TestDesiredStateRetriedWhenNotPersisted(t *testing.T) {
	a, err := New(Config{NodeName: "n", Ephemeral: true}, nil, nil)
	require.NoError(t, err)
	store := &flakyStore{stateStore: a.store, fail: true}
	a.store = store
	b, err := json.Marshal(schema.DesiredState{SchemaVersion: schema.WireVersion, Node: "n", Generation: 1,
		Instances: []schema.DesiredInstance{{DaemonSet: "a/x", Revision: "0123456789abcdef0123"}}})
	require.NoError(t, err)

	a.HandleMessage(a.desiredTopic(), b)
	a.processInbox(context.Background())
	assert.Nil(t, a.desired, "not applied before it is persisted")
	assert.Contains(t, a.inbox, a.desiredTopic(), "kept for the next pass")

	store.fail = false
	a.processInbox(context.Background())
	require.NotNil(t, a.desired)
	assert.Equal(t, uint64(1), a.desired.Generation)
	assert.Equal(t, map[string]bool{schema.RevisionTopic("0123456789abcdef0123"): true}, a.missing)
	st, err := a.store.load()
	require.NoError(t, err)
	assert.Equal(t, uint64(1), st.desired.Generation)
}
