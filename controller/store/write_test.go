package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOnWriteReportsCommitsNotRefusals: OnWrite hears of every commit
// (nil) and of every write the file refused (here an injected fault), but
// not of a write the store's own logic refused.
func TestOnWriteReportsCommitsNotRefusals(t *testing.T) {
	var mu sync.Mutex
	var got []error
	s, _ := openTempUnmirrored(t, Options{OnWrite: func(err error) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, err)
	}})
	reported := func() []error {
		mu.Lock()
		defer mu.Unlock()
		out := got
		got = nil
		return out
	}
	require.NoError(t, s.PutNode(NodeRecord{Name: "n1"}))
	assert.Equal(t, []error{nil}, reported(), "a commit is reported as a success")

	_, err := s.SetCurrentRevision("default/absent", "abc", t0)
	require.ErrorIs(t, err, ErrNotFound)
	assert.Empty(t, reported(), "a refusal of the store's logic says nothing about the disk")

	diskFull := errors.New("no space left on device")
	s.FailWrites(func() error { return diskFull })
	err = s.PutNodes([]NodeRecord{{Name: "n2"}})
	require.ErrorIs(t, err, diskFull)
	errs := reported()
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], diskFull)
	assert.Contains(t, errs[0].Error(), s.Path(), "the report names the file")
	_, err = s.GetNode("n2")
	require.ErrorIs(t, err, ErrNotFound, "a refused write keeps nothing")

	s.FailWrites(nil)
	require.NoError(t, s.PutNode(NodeRecord{Name: "n2"}))
	assert.Equal(t, []error{nil}, reported())
}

// TestUpdateOverridesConcurrentKeepsEveryChange: concurrent updates of one
// node's overrides, each adding its own label and taint, keep all of them.
func TestUpdateOverridesConcurrentKeepsEveryChange(t *testing.T) {
	s, _ := openTemp(t, Options{})
	const n = 20
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.UpdateOverrides("n1", func(o *NodeOverrides) error {
				if o.Labels == nil {
					o.Labels = map[string]*string{}
				}
				v := "v"
				o.Labels[fmt.Sprintf("k%d", i)] = &v
				o.RemovedTaints = append(o.RemovedTaints, fmt.Sprintf("t%d:NoSchedule", i))
				return nil
			})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	o, err := s.GetOverrides("n1")
	require.NoError(t, err)
	assert.Len(t, o.Labels, n)
	assert.Len(t, o.RemovedTaints, n)
}

// TestUpdateOverridesRefusedWritesNothing: an update whose function fails
// keeps the stored overrides and returns the function's error.
func TestUpdateOverridesRefusedWritesNothing(t *testing.T) {
	s, _ := openTemp(t, Options{})
	v := "a"
	require.NoError(t, s.PutOverrides("n1", NodeOverrides{Labels: map[string]*string{"k": &v}}))
	refused := errors.New("refused")
	_, err := s.UpdateOverrides("n1", func(o *NodeOverrides) error {
		o.Labels = nil
		return refused
	})
	require.Equal(t, refused, err)
	o, err := s.GetOverrides("n1")
	require.NoError(t, err)
	assert.Equal(t, "a", *o.Labels["k"])
}
