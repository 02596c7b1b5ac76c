package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/internal/checkfor"
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

// TestRefusedRequestIsNamed: a log or exec request the node refuses (its
// signature does not verify there) is not answered; the API's 504 then
// names the refusal the node reported instead of asking whether it is
// online. The request travelled signed.
func TestRefusedRequestIsNamed(t *testing.T) {
	tc := startController(t, Config{Signing: true, logAnswerTimeout: 2 * time.Second})
	n := startNode(t, tc.brokerURL(), tc.secret, gateway("gw-1", nil))
	tc.applyYAML(t, exporterYAML)
	checkfor.Eventually(t, wait, 20*time.Millisecond, func() error {
		_, err := tc.GetNode(context.Background(), "gw-1")
		return err
	})
	for _, kind := range []string{schema.TopicLogsRequest, schema.TopicExecRequest} {
		topic := schema.NodeTopic("gw-1", kind)
		require.NoError(t, tc.embeddedBroker(t).Subscribe(topic, 78, func(_ string, payload []byte) {
			if !signing.IsEnvelope(payload) {
				t.Errorf("a plain request on %s", topic)
			}
			ev := schema.NodeEvent{SchemaVersion: schema.WireVersion, Node: "gw-1", Time: time.Now().UTC(), Type: schema.EventWarning,
				Reason: "SignedDocumentExpired", Message: "refused " + topic + ": document expired: expired at X, now Y; nothing was run or sent"}
			b, err := schema.Encode(ev)
			if err == nil {
				err = n.client.Publish(context.Background(), schema.NodeTopic("gw-1", schema.TopicEvents), b, false)
			}
			if err != nil {
				t.Errorf("publish the refusal: %v", err)
			}
		}))
	}

	_, err := tc.api.Logs(context.Background(), api.LogsRequest{DaemonSet: "monitoring/exporter", Node: "gw-1"})
	require.ErrorIs(t, err, api.ErrTimeout)
	assert.Contains(t, err.Error(), "node gw-1 did not answer: it reported: refused edgeset/v1/nodes/gw-1/logs/request: document expired")

	_, err = tc.api.Exec(context.Background(), "monitoring/exporter", api.ExecRequest{Node: "gw-1", Command: []string{"id"}},
		func(api.ExecChunk) error { return nil })
	require.ErrorIs(t, err, api.ErrTimeout)
	assert.Contains(t, err.Error(), "node gw-1 did not answer: it reported: refused edgeset/v1/nodes/gw-1/exec/request: document expired")
}
