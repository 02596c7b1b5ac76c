package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/mqttclient"
	"github.com/edgeset/edgeset/schema"
	"github.com/edgeset/edgeset/signing"
)

// TestRequestStatements: a request the controller signs (exec, its
// input, logs) is bound to its node and topic and expires
// signing.RequestValidity after it is issued; a document keeps the
// signing validity.
func TestRequestStatements(t *testing.T) {
	key, err := signing.GenerateKey()
	require.NoError(t, err)
	k := &signingKeys{signer: signing.NewSigner(key), validity: 7 * 24 * time.Hour}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		topic   string
		payload string
		expires time.Duration
	}{
		{schema.NodeTopic("gw-1", schema.TopicExecRequest), `{"node":"gw-1","id":"a1"}`, signing.RequestValidity},
		{schema.ExecInputTopic("gw-1", "a1"), `{"node":"gw-1","id":"a1","seq":0}`, signing.RequestValidity},
		{schema.NodeTopic("gw-1", schema.TopicLogsRequest), `{"node":"gw-1","id":"b2"}`, signing.RequestValidity},
		{schema.NodeTopic("gw-1", schema.TopicDesired), `{"node":"gw-1","generation":3}`, 7 * 24 * time.Hour},
	} {
		t.Run(tc.topic, func(t *testing.T) {
			m := mqttclient.Message{Topic: tc.topic, Payload: []byte(tc.payload)}
			require.True(t, signed(m))
			st, err := k.statement(m, now)
			require.NoError(t, err)
			assert.Equal(t, "gw-1", st.Node)
			assert.Equal(t, tc.topic, st.Topic)
			assert.Equal(t, now, st.IssuedAt)
			assert.Equal(t, now.Add(tc.expires), st.ExpiresAt)
		})
	}
}
