package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRollouts(t *testing.T) {
	type state struct {
		Phase   string   `json:"phase"`
		Updated []string `json:"updated"`
	}
	s, _ := openTemp(t, Options{})
	var got state
	found, err := s.GetRollout("default/a", &got)
	require.NoError(t, err)
	assert.False(t, found)

	want := state{Phase: "Progressing", Updated: []string{"n1", "n2"}}
	require.NoError(t, s.PutRollout("default/a", want))
	found, err = s.GetRollout("default/a", &got)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, want, got)

	require.ErrorContains(t, s.PutRollout("default/b", func() {}), "default/b")

	require.NoError(t, s.DeleteRollout("default/a"))
	require.NoError(t, s.DeleteRollout("default/a"))
	found, err = s.GetRollout("default/a", &got)
	require.NoError(t, err)
	assert.False(t, found)
}
