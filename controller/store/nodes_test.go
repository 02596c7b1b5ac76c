package store

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/edgeset/edgeset/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ptr[T any](v T) *T { return &v }

func TestOverrides(t *testing.T) {
	s, _ := openTemp(t, Options{})
	cases := []struct {
		name string
		node string
		in   NodeOverrides
	}{
		{"set and remove labels", "n2", NodeOverrides{
			Labels:    map[string]*string{"zone": ptr("eu-1"), "kubernetes.io/arch": nil},
			UpdatedAt: t0,
		}},
		{"taints and cordon", "n1", NodeOverrides{
			Taints:        []schema.Taint{{Key: "maintenance", Value: "yes", Effect: schema.TaintNoSchedule}},
			RemovedTaints: []string{"gpu:NoSchedule"},
			Unschedulable: ptr(true),
			UpdatedAt:     t0,
		}},
		{"explicit uncordon", "n3", NodeOverrides{Unschedulable: ptr(false), UpdatedAt: t0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, s.PutOverrides(tc.node, tc.in))
			got, err := s.GetOverrides(tc.node)
			require.NoError(t, err)
			want := tc.in
			want.Node = tc.node
			assert.Equal(t, want, got)
		})
	}
	t.Run("removal is kept apart from absence", func(t *testing.T) {
		got, err := s.GetOverrides("n2")
		require.NoError(t, err)
		v, listed := got.Labels["kubernetes.io/arch"]
		assert.True(t, listed)
		assert.Nil(t, v)
	})
	t.Run("list and delete", func(t *testing.T) {
		list, err := s.ListOverrides()
		require.NoError(t, err)
		require.Len(t, list, 3)
		assert.Equal(t, "n1", list[0].Node)
		require.NoError(t, s.DeleteOverrides("n1"))
		require.NoError(t, s.DeleteOverrides("n1"))
		_, err = s.GetOverrides("n1")
		require.ErrorIs(t, err, ErrNotFound)
	})
}

func testNode(name string, online bool) NodeRecord {
	return NodeRecord{
		Name: name,
		Status: schema.NodeStatus{
			SchemaVersion: schema.WireVersion,
			Node:          name,
			Labels:        map[string]string{schema.LabelHostname: name},
			Conditions:    []schema.NodeCondition{{Type: schema.NodeReady, Status: schema.ConditionTrue, Since: t0}},
		},
		Online:   online,
		Session:  t0.UnixNano(),
		LastSeen: t0,
	}
}

func TestNodes(t *testing.T) {
	s, _ := openTemp(t, Options{})
	offline := testNode("n2", false)
	offline.OfflineSince = t0.Add(time.Minute)
	cases := []struct {
		name string
		rec  NodeRecord
	}{
		{"online", testNode("n1", true)},
		{"offline", offline},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, s.PutNode(tc.rec))
			got, err := s.GetNode(tc.rec.Name)
			require.NoError(t, err)
			assert.Equal(t, tc.rec, got)
		})
	}

	_, err := s.GetNode("n9")
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorContains(t, s.PutNode(NodeRecord{}), "name is empty")

	require.NoError(t, s.DeleteNode("n1"))
	require.NoError(t, s.DeleteNode("n1"))
	list, err := s.ListNodes()
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "n2", list[0].Name)
}

func TestPutNodesIsAllOrNothing(t *testing.T) {
	s, _ := openTemp(t, Options{})
	var recs []NodeRecord
	for i := range 100 {
		recs = append(recs, testNode(fmt.Sprintf("n%03d", i), true))
	}
	require.NoError(t, s.PutNodes(recs))
	list, err := s.ListNodes()
	require.NoError(t, err)
	assert.Len(t, list, 100)

	bad := []NodeRecord{testNode("x1", true), {}}
	require.Error(t, s.PutNodes(bad))
	_, err = s.GetNode("x1")
	require.ErrorIs(t, err, ErrNotFound, "failed batch left a record")
}

func TestPutNodeConcurrent(t *testing.T) {
	s, _ := openTemp(t, Options{})
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			assert.NoError(t, s.PutNode(testNode(fmt.Sprintf("n%02d", i), true)))
		})
	}
	wg.Wait()
	list, err := s.ListNodes()
	require.NoError(t, err)
	assert.Len(t, list, 50)
}
