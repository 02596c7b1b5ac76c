package natsauth_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/broker/natsauth"
	"github.com/edgeset/edgeset/credential"
	"github.com/edgeset/edgeset/internal/checkfor"
	"github.com/edgeset/edgeset/mqttclient"
)

// TestRotatedTokenRefusedOnCluster: once a node's credential epoch moves
// on (DATA_DIR/node-epochs, as the controller writes it), the callout
// refuses its old token on every server and admits the new one.
func TestRotatedTokenRefusedOnCluster(t *testing.T) {
	f := startFleet(t, nil)
	c, err := f.dial(t, 0, "n1", "n1", f.token("n1"), nil)
	require.NoError(t, err, "epoch 0 before any rotation")
	c.Disconnect(0) // an admitted connection lasts until UserTTL (see TestUserTTLCutsRevokedNode)

	require.NoError(t, credential.WriteEpochs(f.dataDir, map[string]uint64{"n1": 1}))
	checkfor.Eventually(t, waitFor, 20*time.Millisecond, func() error {
		// the responder polls the revocation list and epochs
		if _, err := f.dial(t, 1, "n1", "n1", f.token("n1"), nil); err == nil {
			return errors.New("old token still admitted")
		}
		return nil
	})
	for server := range 3 {
		before := f.resp.Stats().Denied[natsauth.ReasonBadPassword]
		_, err := f.dial(t, server, "n1", "n1", f.token("n1"), nil)
		assert.True(t, mqttclient.IsAuthRefused(err), "server %d: %v", server, err)
		assert.Equal(t, before+1, f.resp.Stats().Denied[natsauth.ReasonBadPassword], "server %d", server)
		// The new token is admitted; the cluster may take a moment to
		// release the MQTT session of the client ID's last connection.
		checkfor.Eventually(t, waitFor, 50*time.Millisecond, func() error {
			c, err := f.dial(t, server, "n1", "n1", credential.NodeTokenAt(f.secret, "n1", 1), nil)
			if err != nil {
				if mqttclient.IsAuthRefused(err) {
					t.Fatalf("server %d refused the new token: %v", server, err)
				}
				return err
			}
			c.Disconnect(0)
			return nil
		})
	}
	_, err = f.dial(t, 2, "n2", "n2", f.token("n2"), nil)
	assert.NoError(t, err, "another node is untouched")
}
