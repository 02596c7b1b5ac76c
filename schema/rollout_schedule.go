package schema

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// TopologyBudget is spec.rollout.maxUnavailablePerTopology: the nodes
// that share a value of the label TopologyKey (a site) form one domain, and
// at most MaxUnavailable of each domain's nodes (a count, or a percentage
// of the domain's nodes rounded up, as maxUnavailable rounds) are updated
// at once. Nodes without the label form one domain of their own.
type TopologyBudget struct {
	TopologyKey    string       `json:"topologyKey"`
	MaxUnavailable *IntOrString `json:"maxUnavailable"`
}

// MaintenanceWindow is one entry of spec.rollout.maintenanceWindows: a
// window opens at every time Schedule (a five-field cron expression, or a
// descriptor such as @daily) names in TimeZone (an IANA zone, UTC when
// empty) and stays open for Duration (a Go duration: 90m, 2h). It applies
// to the nodes whose labels match NodeSelector (every node when empty).
type MaintenanceWindow struct {
	Schedule     string            `json:"schedule"`
	Duration     string            `json:"duration"`
	TimeZone     string            `json:"timeZone,omitempty"`
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
}

// Limits of spec.rollout.maintenanceWindows.
const (
	// MaxMaintenanceWindows is how many windows one daemonset may list.
	MaxMaintenanceWindows = 16
	// MaxWindowDuration is the longest window: a week, the longest period
	// a cron schedule has but for day-of-month and month fields.
	MaxWindowDuration = 7 * 24 * time.Hour
	maxScheduleLen    = 128
)

// cronParser reads the five standard fields and the @ descriptors, as
// Kubernetes' CronJob schedule does.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule parses a maintenance window's schedule, evaluated in loc.
// A time zone inside the expression (TZ= or CRON_TZ=) is refused: the
// window's timeZone says it.
func ParseSchedule(expr string, loc *time.Location) (cron.Schedule, error) {
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, errTimeZoneInSchedule
	}
	sched, err := cronParser.Parse(expr)
	if err != nil {
		return nil, err
	}
	if spec, ok := sched.(*cron.SpecSchedule); ok {
		spec.Location = loc
	}
	return sched, nil
}

// LoadWindowLocation resolves a maintenance window's timeZone: UTC when
// empty; "Local" is refused, since it would be the controller host's zone.
func LoadWindowLocation(name string) (*time.Location, error) {
	if name == "Local" {
		return nil, errLocalTimeZone
	}
	return time.LoadLocation(name)
}

type windowError string

func (e windowError) Error() string { return string(e) }

const (
	errTimeZoneInSchedule windowError = "a time zone in the schedule (TZ= or CRON_TZ=) is not supported: use timeZone"
	errLocalTimeZone      windowError = `"Local" is not supported: name an IANA time zone such as Europe/Berlin, or leave it empty for UTC`
)

// validateSchedulePolicy checks spec.rollout.maxUnavailablePerTopology
// and spec.rollout.maintenanceWindows.
func validateSchedulePolicy(errs *fieldErrors, field string, r *RolloutPolicy) {
	if b := r.MaxUnavailablePerTopology; b != nil {
		f := field + ".maxUnavailablePerTopology"
		if b.TopologyKey == "" {
			errs.add(f+".topologyKey", "required: the node label whose values name the domains (sites)")
		} else if problem := LabelKeyProblem(b.TopologyKey); problem != "" {
			errs.add(f+".topologyKey", "%s", problem)
		}
		if b.MaxUnavailable == nil {
			errs.add(f+".maxUnavailable", "required: a count of at least 1 or a percentage above 0%%")
		} else if validateIntOrPercent(errs, f+".maxUnavailable", b.MaxUnavailable) && isZero(b.MaxUnavailable) {
			errs.add(f+".maxUnavailable", "must be at least 1 or a percentage above 0%%, not %s", b.MaxUnavailable)
		}
	}
	if len(r.MaintenanceWindows) > MaxMaintenanceWindows {
		errs.add(field+".maintenanceWindows", "at most %d windows, not %d", MaxMaintenanceWindows, len(r.MaintenanceWindows))
		return
	}
	for i := range r.MaintenanceWindows {
		validateWindow(errs, fmt.Sprintf("%s.maintenanceWindows[%d]", field, i), &r.MaintenanceWindows[i])
	}
}

func validateWindow(errs *fieldErrors, field string, w *MaintenanceWindow) {
	loc, err := LoadWindowLocation(w.TimeZone)
	if err != nil {
		errs.add(field+".timeZone", "unknown time zone %q: %v", w.TimeZone, err)
		loc = time.UTC
	}
	switch {
	case w.Schedule == "":
		errs.add(field+".schedule", `required: a cron schedule such as "0 2 * * *"`)
	case len(w.Schedule) > maxScheduleLen:
		errs.add(field+".schedule", "at most %d characters, not %d", maxScheduleLen, len(w.Schedule))
	default:
		sched, err := ParseSchedule(w.Schedule, loc)
		if err != nil {
			errs.add(field+".schedule", "invalid schedule %q: %v", w.Schedule, err)
		} else if sched.Next(scheduleProbe.In(loc)).IsZero() {
			errs.add(field+".schedule", "schedule %q never fires", w.Schedule)
		}
	}
	if w.Duration == "" {
		errs.add(field+".duration", "required: how long the window stays open, such as 2h or 90m")
	} else if d, err := time.ParseDuration(w.Duration); err != nil {
		errs.add(field+".duration", "invalid duration %q: %v", w.Duration, err)
	} else if d <= 0 || d > MaxWindowDuration {
		errs.add(field+".duration", "must be above 0 and at most %s, not %s", MaxWindowDuration, w.Duration)
	}
	validateLabels(errs, field+".nodeSelector", w.NodeSelector)
}

// scheduleProbe is the instant a schedule is checked to fire after: any
// schedule that fires at all does within five years of any instant.
var scheduleProbe = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// WindowSelects reports whether w applies to a node with these labels.
func (w *MaintenanceWindow) WindowSelects(labels map[string]string) bool {
	for k, v := range w.NodeSelector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
