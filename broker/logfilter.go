package broker

import (
	"context"
	"log/slog"

	"github.com/mochi-mqtt/server/v2/packets"
)

// mochiHandler is the handler of mochi's logger. Mochi logs every hook and
// listener at info, which drowns the controller's own log, and a packet it
// could not process as a warning carrying the whole packet struct (payload
// included), which a client can repeat at will. So mochiHandler passes:
//   - records at or above level (warn), with every packet attribute
//     removed, at most one per message and client per LogInterval (the
//     next one says how many were suppressed);
//   - the packet itself only as a separate debug record, when the base
//     handler is enabled at debug;
//   - while the broker is closing (connections failing as they are
//     closed), the records only at debug.
type mochiHandler struct {
	slog.Handler
	level   slog.Level
	limiter *logLimiter
	closing func() bool
}

func (h mochiHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level && h.Handler.Enabled(ctx, l)
}

func (h mochiHandler) Handle(ctx context.Context, r slog.Record) error {
	var attrs, packet []slog.Attr
	client := ""
	r.Attrs(func(a slog.Attr) bool {
		switch {
		case isPacket(a.Value):
			packet = append(packet, a)
		default:
			if a.Key == "client" {
				client = a.Value.String()
			}
			attrs = append(attrs, a)
		}
		return true
	})
	level := r.Level
	if h.closing() {
		level = slog.LevelDebug
	}
	if level > slog.LevelDebug {
		n, ok := h.limiter.Allow("mochi/" + r.Message + "/" + client)
		if !ok {
			return nil
		}
		if n > 0 {
			attrs = append(attrs, slog.Int("suppressed", n))
		}
	}
	if err := h.emit(ctx, r, level, r.Message, attrs); err != nil {
		return err
	}
	if len(packet) > 0 && h.Handler.Enabled(ctx, slog.LevelDebug) {
		return h.emit(ctx, r, slog.LevelDebug, r.Message+": packet", append(attrs, packet...))
	}
	return nil
}

// emit hands the base handler a copy of r at level with msg and attrs.
func (h mochiHandler) emit(ctx context.Context, r slog.Record, level slog.Level, msg string, attrs []slog.Attr) error {
	if !h.Handler.Enabled(ctx, level) {
		return nil
	}
	out := slog.NewRecord(r.Time, level, msg, r.PC)
	out.AddAttrs(attrs...)
	return h.Handler.Handle(ctx, out)
}

func (h mochiHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	h.Handler = h.Handler.WithAttrs(attrs)
	return h
}

func (h mochiHandler) WithGroup(name string) slog.Handler {
	h.Handler = h.Handler.WithGroup(name)
	return h
}

// isPacket reports whether v holds an MQTT packet.
func isPacket(v slog.Value) bool {
	if v.Kind() != slog.KindAny {
		return false
	}
	switch v.Any().(type) {
	case packets.Packet, *packets.Packet:
		return true
	}
	return false
}
