// Package mochistop closes a mochi-mqtt server without the step of its
// Close that can hang it.
//
// mochi v2.7.9's Server.Close disconnects each listener's clients through
// Clients.GetByListener, which takes the clients' read lock twice: when a
// client connects or disconnects between the two (its Add or Delete waits
// for the write lock), the second read lock queues behind it and the
// server deadlocks for good (mochi-mqtt/server#488; the fixes, #489 and
// #507, are not released). Close here closes each listener with a
// disconnect of its clients from one Clients.GetAll snapshot and removes
// it, so Server.Close finds no listener left: it only waits for the
// clients' goroutines and stops the hooks.
package mochistop

import (
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// Close closes srv, whose listeners are listenerIDs, and returns
// Server.Close's error.
func Close(srv *mochi.Server, listenerIDs ...string) error {
	for _, id := range listenerIDs {
		srv.Listeners.Close(id, func(id string) { disconnect(srv, id) })
		srv.Listeners.Delete(id)
	}
	return srv.Close()
}

// disconnect disconnects the clients of listener id.
func disconnect(srv *mochi.Server, id string) {
	for _, cl := range srv.Clients.GetAll() {
		if cl.Net.Listener == id && !cl.Closed() {
			_ = srv.DisconnectClient(cl, packets.ErrServerShuttingDown)
		}
	}
}
