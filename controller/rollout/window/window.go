// Package window evaluates a rollout's maintenance windows: a cron
// schedule in a time zone opens a window that stays open for a duration.
// Everything here is a pure function of the window and an instant given by
// the caller; nothing reads the clock.
//
// Schedules are parsed by github.com/robfig/cron/v3 (five fields or an @
// descriptor, as Kubernetes' CronJob reads them) and evaluated in the
// window's zone, so "0 2 * * *" in Europe/Berlin opens at 02:00 Berlin time
// in summer and in winter. The duration is elapsed time: a 2h window that
// opens at 02:00 on the night clocks go back closes at 03:00 local time.
// On the night clocks go forward, an opening in the skipped hour does not
// happen (the window stays shut that night, as a Kubernetes CronJob, read
// by the same library, does not run); on the night they go back, an
// opening in the repeated hour happens twice and the window covers both.
package window

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/edgeset/edgeset/schema"
)

// Window is one maintenance window, resolved from its spec.
type Window struct {
	schedule cron.Schedule
	duration time.Duration
	selector map[string]string
	// spec is the window as declared, what Equal compares.
	spec schema.MaintenanceWindow
}

// New resolves a window's spec (validated by the schema; New repeats the
// checks it needs and names the field it fails on). On error it returns,
// with the error, a window of that spec that never opens.
func New(spec schema.MaintenanceWindow) (Window, error) {
	never := Window{selector: spec.NodeSelector, spec: spec}
	loc, err := schema.LoadWindowLocation(spec.TimeZone)
	if err != nil {
		return never, fmt.Errorf("timeZone %q: %w", spec.TimeZone, err)
	}
	sched, err := schema.ParseSchedule(spec.Schedule, loc)
	if err != nil {
		return never, fmt.Errorf("schedule %q: %w", spec.Schedule, err)
	}
	d, err := time.ParseDuration(spec.Duration)
	if err != nil {
		return never, fmt.Errorf("duration %q: %w", spec.Duration, err)
	}
	if d <= 0 {
		return never, fmt.Errorf("duration %q: must be above 0", spec.Duration)
	}
	return Window{schedule: sched, duration: d, selector: spec.NodeSelector, spec: spec}, nil
}

// Spec is the window as declared.
func (w Window) Spec() schema.MaintenanceWindow { return w.spec }

// Selects reports whether the window applies to a node with these labels:
// every label of its nodeSelector, with its value (no selector: every
// node).
func (w Window) Selects(labels map[string]string) bool {
	for k, v := range w.selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Equal reports whether w and o are the same window as declared.
func (w Window) Equal(o Window) bool {
	a, b := w.spec, o.spec
	if a.Schedule != b.Schedule || a.Duration != b.Duration || a.TimeZone != b.TimeZone || len(a.NodeSelector) != len(b.NodeSelector) {
		return false
	}
	for k, v := range a.NodeSelector {
		if got, ok := b.NodeSelector[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// maxMerge bounds how many overlapping openings State follows to find
// where an open window ends; past it, the end it reports is earlier than
// the true one, which only makes a caller look again sooner.
const maxMerge = 64

// State is a window at an instant: open or not, and when that changes.
type State struct {
	Open bool
	// Change is when the window next closes (Open) or opens (not Open);
	// zero if it never opens again.
	Change time.Time
}

// At is the window at now. A window is open from each time its schedule
// names for its duration: over [start, start+duration). Openings that
// overlap or touch make one longer window.
//
// The zero Window never opens.
func (w Window) At(now time.Time) State {
	if w.schedule == nil {
		return State{}
	}
	start := w.schedule.Next(now.Add(-w.duration))
	if start.IsZero() || start.After(now) {
		return State{Change: start}
	}
	end := start.Add(w.duration)
	for range maxMerge {
		next := w.schedule.Next(start)
		if next.IsZero() || next.After(end) {
			break
		}
		start, end = next, next.Add(w.duration)
	}
	return State{Open: true, Change: end}
}
