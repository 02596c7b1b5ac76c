package broker

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/edgeset/edgeset/internal/checkfor"
)

// TestMochiPacketErrorsLogNoPacket: a packet mochi cannot process (a QoS 1
// publish to a forbidden topic, which disconnects an MQTT 3.1.1 client)
// is one warning naming the client and the error, without the packet
// struct or its payload, at most once per client and LogInterval; the
// packet itself is logged only at debug.
func TestMochiPacketErrorsLogNoPacket(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		t.Run(level.String(), func(t *testing.T) {
			clock := newFakeClock()
			logs := &logRecorder{}
			tb := startBroker(t, Options{now: clock.Now, Logger: slog.New(minLevel{logs, level}),
				Limits: Limits{LogInterval: time.Minute}})
			const payload = "SECRET-PAYLOAD"
			for i := range 3 {
				cl := mustDial(t, tb.Addr(), tb.node("node-a"))
				cl.Publish("edgeset/v1/nodes/node-b/status", 1, false, payload)
				checkfor.Eventually(t, wait, 10*time.Millisecond, func() error {
					if cl.IsConnectionOpen() {
						return fmt.Errorf("attempt %d: client not disconnected", i)
					}
					return nil
				})
			}
			checkfor.Eventually(t, wait, 10*time.Millisecond, func() error {
				if got := logs.matching(`WARN "error processing packet"`, "client=node-a"); len(got) != 1 {
					return fmt.Errorf("want one warning for three bad packets, got %q", got)
				}
				return nil
			})
			for _, rec := range logs.all() {
				if !strings.HasPrefix(rec, "DEBUG") && (strings.Contains(rec, payload) || strings.Contains(rec, "Payload") || strings.Contains(rec, "pk=")) {
					t.Errorf("packet logged above debug: %s", rec)
				}
			}
			dumps := logs.matching(`DEBUG "error processing packet: packet"`, "pk=")
			if level == slog.LevelDebug && len(dumps) == 0 {
				t.Error("no debug record of the packet at log level debug")
			}
			if level == slog.LevelInfo && len(dumps) > 0 {
				t.Errorf("packet dumped at log level info: %q", dumps)
			}
		})
	}
}
