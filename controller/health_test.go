package controller

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
)

func TestHealthJoinsFaultsAndProbes(t *testing.T) {
	var h health
	require.NoError(t, h.err(), "no fault, no probe")

	h.set("store", errors.New("disk full"))
	probeErr := errors.New("accept: too many open files")
	h.probe("mqtt listener", func() error { return probeErr })
	err := h.err()
	require.ErrorIs(t, err, api.ErrUnavailable)
	assert.Contains(t, err.Error(), "store: disk full")
	assert.Contains(t, err.Error(), "mqtt listener: accept: too many open files")
	assert.Less(t, strings.Index(err.Error(), "mqtt listener"), strings.Index(err.Error(), "store"), "sorted by condition")

	h.set("store", nil)
	probeErr = nil
	assert.NoError(t, h.err(), "cleared fault and passing probe")
}
