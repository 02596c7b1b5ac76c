package docker

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	"github.com/edgeset/edgeset/edgeagent"
)

// eventActions are the container actions Events reports.
var eventActions = []string{"start", "die", "destroy", "oom", "health_status"}

// engineAttributes are event attributes the engine adds next to a
// container's labels.
var engineAttributes = []string{"name", "image", "exitCode", "signal", "execDuration"}

// Events streams start, die, destroy, oom and health_status events of
// managed containers. The subscription is in place when Events returns, so
// a container started afterwards is seen. The event channel closes when the
// stream ends; the error channel then yields the stream's error (nothing if
// ctx ended) and closes.
func (r *Runtime) Events(ctx context.Context) (<-chan edgeagent.RuntimeEvent, <-chan error) {
	filters := make(client.Filters).
		Add("type", string(events.ContainerEventType)).
		Add("label", edgeagent.LabelManaged+"=true").
		Add("event", eventActions...)
	sub := r.cli.Events(ctx, client.EventsListOptions{Filters: filters})
	out := make(chan edgeagent.RuntimeEvent)
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		defer close(out)
		if err := forwardEvents(ctx, sub, out); err != nil && ctx.Err() == nil {
			errs <- fmt.Errorf("docker events at %s: %w", r.cli.DaemonHost(), err)
		}
	}()
	return out, errs
}

// forwardEvents converts and forwards messages until the stream fails or
// ctx ends, returning the stream's error.
func forwardEvents(ctx context.Context, sub client.EventsResult, out chan<- edgeagent.RuntimeEvent) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-sub.Err:
			return err
		case msg := <-sub.Messages:
			select {
			case out <- runtimeEvent(msg):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// runtimeEvent converts an engine event. Health events ("health_status:
// healthy") become "health_status"; Labels are the container's labels.
func runtimeEvent(msg events.Message) edgeagent.RuntimeEvent {
	action, _, _ := strings.Cut(string(msg.Action), ":")
	labels := maps.Clone(msg.Actor.Attributes)
	for _, k := range engineAttributes {
		delete(labels, k)
	}
	ev := edgeagent.RuntimeEvent{
		ContainerID: msg.Actor.ID,
		Action:      action,
		Labels:      labels,
		Time:        eventTime(msg),
	}
	if code, err := strconv.Atoi(msg.Actor.Attributes["exitCode"]); err == nil {
		ev.ExitCode = code
	}
	return ev
}

// eventTime is the event's time at the best precision the engine gave.
func eventTime(msg events.Message) time.Time {
	if msg.TimeNano != 0 {
		return time.Unix(0, msg.TimeNano)
	}
	return time.Unix(msg.Time, 0)
}
