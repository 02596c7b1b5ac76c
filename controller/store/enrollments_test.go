package store

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEnrollmentRecords(t *testing.T) {
	s, _ := openTemp(t, Options{})
	require.NoError(t, s.PutEnrollment(EnrollmentRecord{ID: "b", Uses: 2, CreatedAt: t0}))
	require.NoError(t, s.PutEnrollment(EnrollmentRecord{ID: "a", Uses: 1, CreatedAt: t0}))

	refused := errors.New("refused")
	_, err := s.UpdateEnrollment("b", func(r *EnrollmentRecord, found bool) error {
		assert.True(t, found)
		r.Enrolled = append(r.Enrolled, "n1")
		return refused
	})
	require.ErrorIs(t, err, refused)
	rec, err := s.UpdateEnrollment("b", func(r *EnrollmentRecord, _ bool) error {
		assert.Empty(t, r.Enrolled, "a failed update wrote nothing")
		r.Enrolled = append(r.Enrolled, "n2")
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"n2"}, rec.Enrolled)
	_, err = s.UpdateEnrollment("missing", func(_ *EnrollmentRecord, found bool) error {
		assert.False(t, found)
		return refused
	})
	require.ErrorIs(t, err, refused)

	list, err := s.ListEnrollments()
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, "a", list[0].ID, "listed by ID")
	assert.Equal(t, []string{"n2"}, list[1].Enrolled)

	found, err := s.DeleteEnrollment("a")
	require.NoError(t, err)
	assert.True(t, found)
	found, err = s.DeleteEnrollment("a")
	require.NoError(t, err)
	assert.False(t, found)
}
