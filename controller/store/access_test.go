package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/access"
	"github.com/edgeset/edgeset/controller/audit"
)

func TestUsersRoundTripAndSurviveRestart(t *testing.T) {
	s, path := openTemp(t, Options{})
	users, err := s.ListUsers()
	require.NoError(t, err)
	assert.Empty(t, users, "a store from before users has none")

	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ops := access.User{Name: "ops", Role: access.RoleViewer, TokenHash: access.HashToken("t"), CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
	require.NoError(t, s.PutUser(ops))
	require.NoError(t, s.PutUser(access.User{Name: "ci", Role: access.RoleOperator, Namespace: "a", TokenHash: access.HashToken("u"), CreatedAt: at}))
	require.NoError(t, s.DeleteUser("ci"))
	assert.ErrorIs(t, s.DeleteUser("ci"), ErrNotFound)
	require.NoError(t, s.Close())

	again, err := Open(path, Options{})
	require.NoError(t, err)
	defer again.Close()
	users, err = again.ListUsers()
	require.NoError(t, err)
	assert.Equal(t, []access.User{ops}, users)
}

func TestAuditAppendFinishList(t *testing.T) {
	s, path := openTemp(t, Options{})
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	entries, err := s.ListAudit(audit.Filter{})
	require.NoError(t, err)
	assert.Empty(t, entries)

	var seqs []uint64
	for i, user := range []string{"a", "b", "a"} {
		seq, err := s.AppendAudit(audit.Entry{Time: now.Add(time.Duration(i) * time.Minute), User: user, Method: "POST", Path: fmt.Sprint("/x/", i)}, audit.Retention{}, now)
		require.NoError(t, err)
		seqs = append(seqs, seq)
	}
	assert.Equal(t, []uint64{1, 2, 3}, seqs)
	require.NoError(t, s.FinishAudit(2, 403, "forbidden: no", time.Millisecond))
	require.NoError(t, s.FinishAudit(99, 200, "", 0), "an entry no longer kept is left alone")

	got, err := s.ListAudit(audit.Filter{User: "a"})
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "/x/0", got[0].Path)
	got, err = s.ListAudit(audit.Filter{SinceSeq: 1, Limit: 1})
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.EqualValues(t, 3, got[0].Seq, "the newest of the limit")
	got, err = s.ListAudit(audit.Filter{Since: now.Add(time.Minute)})
	require.NoError(t, err)
	assert.Len(t, got, 2)
	require.NoError(t, s.Close())

	again, err := Open(path, Options{})
	require.NoError(t, err)
	defer again.Close()
	got, err = again.ListAudit(audit.Filter{})
	require.NoError(t, err, "the log survives a restart")
	require.Len(t, got, 3)
	assert.Equal(t, 403, got[1].Status)
	assert.Equal(t, "forbidden: no", got[1].Message)
	seq, err := again.AppendAudit(audit.Entry{Time: now, User: "c"}, audit.Retention{}, now)
	require.NoError(t, err)
	assert.EqualValues(t, 4, seq, "sequence numbers are never reused")
}

func TestAuditRetention(t *testing.T) {
	s, _ := openTemp(t, Options{})
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ret := audit.Retention{MaxEntries: 5, MaxAge: 10 * time.Hour}
	for i := range 8 {
		_, err := s.AppendAudit(audit.Entry{Time: now, User: fmt.Sprint("u", i)}, ret, now)
		require.NoError(t, err)
	}
	got, err := s.ListAudit(audit.Filter{})
	require.NoError(t, err)
	require.Len(t, got, 5, "count")
	assert.EqualValues(t, 4, got[0].Seq, "the oldest went first")

	later := now.Add(11 * time.Hour)
	_, err = s.AppendAudit(audit.Entry{Time: later, User: "late"}, ret, later)
	require.NoError(t, err)
	got, err = s.ListAudit(audit.Filter{})
	require.NoError(t, err)
	require.Len(t, got, 1, "age: everything older than 10h went")
	assert.Equal(t, "late", got[0].User)

	// Counting stays right after trims: five more fill it again.
	for i := range 5 {
		_, err := s.AppendAudit(audit.Entry{Time: later, User: fmt.Sprint("v", i)}, ret, later)
		require.NoError(t, err)
	}
	got, err = s.ListAudit(audit.Filter{})
	require.NoError(t, err)
	assert.Len(t, got, 5)
}

func TestNodeEpochs(t *testing.T) {
	s, path := openTemp(t, Options{})
	epochs, err := s.NodeEpochs()
	require.NoError(t, err)
	assert.Empty(t, epochs)
	for want := uint64(1); want <= 3; want++ {
		e, err := s.BumpNodeEpoch("gw-1")
		require.NoError(t, err)
		assert.Equal(t, want, e)
	}
	_, err = s.BumpNodeEpoch("gw-2")
	require.NoError(t, err)
	require.NoError(t, s.Close())
	again, err := Open(path, Options{})
	require.NoError(t, err)
	defer again.Close()
	epochs, err = again.NodeEpochs()
	require.NoError(t, err)
	assert.Equal(t, map[string]uint64{"gw-1": 3, "gw-2": 1}, epochs)
}
