package sim

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDevicesSpreadOverBrokers: device i starts on broker node i modulo
// their number and fails over through the rest in list order.
func TestDevicesSpreadOverBrokers(t *testing.T) {
	o, err := Options{BrokerURLs: []string{"tcp://a", "tcp://b", "tcp://c"}, Nodes: 4, Tokens: SecretTokens([]byte("s"))}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, []string{"tcp://a", "tcp://b", "tcp://c"}, o.brokersOf(0))
	assert.Equal(t, []string{"tcp://b", "tcp://c", "tcp://a"}, o.brokersOf(1))
	assert.Equal(t, []string{"tcp://c", "tcp://a", "tcp://b"}, o.brokersOf(2))
	assert.Equal(t, []string{"tcp://a", "tcp://b", "tcp://c"}, o.brokersOf(3))
	assert.Equal(t, []string{"tcp://a", "tcp://b", "tcp://c"}, o.BrokerURLs, "rotation copies, the list stays")

	one, err := Options{BrokerURL: "tcp://a", Nodes: 1, Tokens: SecretTokens([]byte("s"))}.withDefaults()
	require.NoError(t, err)
	assert.Equal(t, []string{"tcp://a"}, one.brokersOf(7))

	_, err = Options{BrokerURL: "tcp://a", BrokerURLs: []string{"tcp://b"}, Nodes: 1, Tokens: SecretTokens([]byte("s"))}.withDefaults()
	assert.ErrorContains(t, err, "set one, not both")
	_, err = Options{Nodes: 1, Tokens: SecretTokens([]byte("s"))}.withDefaults()
	assert.ErrorContains(t, err, "broker URL is required")
}
