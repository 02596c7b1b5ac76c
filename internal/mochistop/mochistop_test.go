package mochistop

import (
	"log/slog"
	"net"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/stretchr/testify/require"
)

// TestCloseDisconnectsClientsAndStopsListening: Close does what mochi's
// Server.Close does, every listener's clients disconnected and no
// listener left accepting, and stops the hooks.
func TestCloseDisconnectsClientsAndStopsListening(t *testing.T) {
	srv := mochi.New(&mochi.Options{InlineClient: true, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, srv.AddHook(new(auth.AllowHook), nil))
	a := listeners.NewTCP(listeners.Config{ID: "a", Address: "127.0.0.1:0"})
	b := listeners.NewTCP(listeners.Config{ID: "b", Address: "127.0.0.1:0"})
	require.NoError(t, srv.AddListener(a))
	require.NoError(t, srv.AddListener(b))
	require.NoError(t, srv.Serve())

	lost := make(chan string, 2)
	for _, ln := range []*listeners.TCP{a, b} {
		o := paho.NewClientOptions().AddBroker("tcp://" + ln.Address()).SetClientID("c-" + ln.ID()).
			SetAutoReconnect(false).SetConnectTimeout(5 * time.Second).
			SetConnectionLostHandler(func(paho.Client, error) { lost <- ln.ID() })
		cl := paho.NewClient(o)
		tok := cl.Connect()
		require.True(t, tok.WaitTimeout(10*time.Second))
		require.NoError(t, tok.Error())
	}

	require.NoError(t, Close(srv, "a", "b"))
	got := map[string]bool{}
	for range 2 {
		select {
		case id := <-lost:
			got[id] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("clients disconnected: %v, want both", got)
		}
	}
	require.Zero(t, srv.Listeners.Len(), "listeners left")
	for _, ln := range []*listeners.TCP{a, b} {
		_, err := net.DialTimeout("tcp", ln.Address(), time.Second)
		require.Error(t, err, "listener %s still accepts", ln.ID())
	}
}
