package controller

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/internal/loglimit"
	"github.com/edgeset/edgeset/schema"
)

// TestMalformedMessagesLoggedWithALimiter: a node may publish malformed
// messages as fast as its link allows; each is counted, but at most one
// line per node and interval is logged (the next one says how many were
// not), so one device cannot fill the controller's disk with log lines.
func TestMalformedMessagesLoggedWithALimiter(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	c, err := New(Config{DataDir: t.TempDir(), MQTTAddr: "127.0.0.1:0", APIAddr: "127.0.0.1:0"}, log)
	require.NoError(t, err)
	t.Cleanup(c.closeResources)
	now := time.Now()
	c.rejectLog = loglimit.New(rejectLogInterval, maxRejectLogKeys, func() time.Time { return now })

	for i := range 1000 {
		c.handleMessage(schema.NodeTopic("noisy", schema.TopicObserved), []byte(fmt.Sprintf(`{"bad":%d}`, i)))
		c.handleMessage(schema.NodeTopic("noisy", schema.TopicEvents), []byte("not json"))
	}
	c.handleMessage(schema.NodeTopic("other", schema.TopicStatus), []byte("{"))
	assert.Equal(t, 2001.0, counterValue(c.metrics.messagesRejected), "every malformed message is counted")
	lines := strings.Count(buf.String(), "dropping malformed message")
	assert.Equal(t, 2, lines, "one line per node and interval:\n%s", buf.String())

	now = now.Add(rejectLogInterval)
	c.handleMessage(schema.NodeTopic("noisy", schema.TopicObserved), []byte(`{"bad":1}`))
	out := buf.String()
	assert.Equal(t, 3, strings.Count(out, "dropping malformed message"))
	assert.Contains(t, out, "suppressed=1999", "the next line counts those not logged")
}
