package window

import (
	"testing"
	"time"
	_ "time/tzdata" // the zones the cases name, whatever the host has

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// TestWindowAt evaluates windows at fixed instants, across time zones and
// the nights clocks change.
func TestWindowAt(t *testing.T) {
	berlin := schema.MaintenanceWindow{Schedule: "0 2 * * *", Duration: "2h", TimeZone: "Europe/Berlin"}
	tests := []struct {
		name   string
		spec   schema.MaintenanceWindow
		now    string
		open   bool
		change string // RFC 3339, UTC
	}{
		{"berlin winter, before", berlin, "2026-01-15T00:30:00Z", false, "2026-01-15T01:00:00Z"},
		{"berlin winter, at the opening", berlin, "2026-01-15T01:00:00Z", true, "2026-01-15T03:00:00Z"},
		{"berlin winter, inside", berlin, "2026-01-15T02:59:59Z", true, "2026-01-15T03:00:00Z"},
		{"berlin winter, at the close", berlin, "2026-01-15T03:00:00Z", false, "2026-01-16T01:00:00Z"},
		{"berlin summer opens an hour earlier in UTC", berlin, "2026-07-15T00:30:00Z", true, "2026-07-15T02:00:00Z"},
		// 2026-03-29: 02:00 CET becomes 03:00 CEST; 02:00 does not exist
		// that night, so the window does not open (as a CronJob, which
		// reads schedules with the same library, does not run).
		{"berlin spring forward, before", berlin, "2026-03-29T00:30:00Z", false, "2026-03-30T00:00:00Z"},
		{"berlin spring forward, skipped", berlin, "2026-03-29T01:30:00Z", false, "2026-03-30T00:00:00Z"},
		// 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:00 happens twice
		// (00:00 and 01:00 UTC), each opens the window for two hours of
		// elapsed time, and the two make one window until 03:00 UTC.
		{"berlin fall back, first 02:00", berlin, "2026-10-25T00:00:00Z", true, "2026-10-25T03:00:00Z"},
		{"berlin fall back, second 02:00", berlin, "2026-10-25T02:30:00Z", true, "2026-10-25T03:00:00Z"},
		{"berlin fall back, after", berlin, "2026-10-25T03:00:00Z", false, "2026-10-26T01:00:00Z"},
		{"new york across its own change", schema.MaintenanceWindow{Schedule: "30 1 * * 0", Duration: "90m", TimeZone: "America/New_York"},
			"2026-03-07T12:00:00Z", false, "2026-03-08T06:30:00Z"},
		{"kolkata half-hour offset", schema.MaintenanceWindow{Schedule: "0 23 * * *", Duration: "1h", TimeZone: "Asia/Kolkata"},
			"2026-05-01T17:45:00Z", true, "2026-05-01T18:30:00Z"},
		{"utc by default", schema.MaintenanceWindow{Schedule: "@daily", Duration: "1h"},
			"2026-05-01T00:59:00Z", true, "2026-05-01T01:00:00Z"},
		{"overlapping openings merge", schema.MaintenanceWindow{Schedule: "0 * * * *", Duration: "90m"},
			"2026-05-01T10:15:00Z", true, "2026-05-01T10:15:00Z"},
		{"touching openings merge", schema.MaintenanceWindow{Schedule: "0 0,6 * * *", Duration: "6h"},
			"2026-05-01T01:00:00Z", true, "2026-05-01T12:00:00Z"},
		{"weekly, far ahead", schema.MaintenanceWindow{Schedule: "0 3 * * 6", Duration: "4h", TimeZone: "Europe/Berlin"},
			"2026-05-04T12:00:00Z", false, "2026-05-09T01:00:00Z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := New(tc.spec)
			require.NoError(t, err)
			got := w.At(utc(tc.now))
			assert.Equal(t, tc.open, got.Open, "open")
			if tc.name == "overlapping openings merge" {
				// Hourly openings of 90 minutes never leave a gap: the
				// merge stops after maxMerge openings, an earlier end.
				assert.Equal(t, utc("2026-05-01T09:00:00Z").Add(maxMerge*time.Hour+90*time.Minute), got.Change.UTC())
				return
			}
			assert.Equal(t, utc(tc.change), got.Change.UTC(), "change")
		})
	}
}

func TestWindowAtAgreesWithStepping(t *testing.T) {
	// A window is open at an instant exactly when one of its openings is
	// at or before it, within its duration: check At against the list
	// of openings, minute by minute over a week with a clock change.
	for _, spec := range []schema.MaintenanceWindow{
		{Schedule: "0 2 * * *", Duration: "2h", TimeZone: "Europe/Berlin"},
		{Schedule: "*/20 * * * *", Duration: "5m", TimeZone: "America/New_York"},
		{Schedule: "15 22 * * 1-5", Duration: "3h", TimeZone: "Australia/Sydney"},
	} {
		w, err := New(spec)
		require.NoError(t, err)
		from := utc("2026-10-22T00:00:00Z")
		until := from.Add(7 * 24 * time.Hour)
		d, _ := time.ParseDuration(spec.Duration)
		var openings []time.Time
		for s := w.schedule.Next(from.Add(-2 * d)); s.Before(until.Add(2 * 24 * time.Hour)); s = w.schedule.Next(s) {
			openings = append(openings, s)
		}
		first := 0 // openings before it closed before now
		for now := from; now.Before(until); now = now.Add(time.Minute) {
			for first < len(openings) && !now.Before(openings[first].Add(d)) {
				first++
			}
			wantOpen := false
			for _, s := range openings[first:] {
				if s.After(now) {
					break
				}
				wantOpen = wantOpen || now.Before(s.Add(d))
			}
			st := w.At(now)
			require.Equal(t, wantOpen, st.Open, "%s at %s", spec.Schedule, now)
			require.True(t, st.Change.After(now), "%s at %s: change %s not after now", spec.Schedule, now, st.Change)
			require.NotEqual(t, st.Open, w.At(st.Change).Open, "%s at %s: nothing changes at %s", spec.Schedule, now, st.Change)
		}
	}
}

func TestNewErrors(t *testing.T) {
	for _, tc := range []struct {
		spec schema.MaintenanceWindow
		want string
	}{
		{schema.MaintenanceWindow{Schedule: "0 2 * * *", Duration: "2h", TimeZone: "Nowhere/City"}, `timeZone "Nowhere/City"`},
		{schema.MaintenanceWindow{Schedule: "61 * * * *", Duration: "2h"}, `schedule "61 * * * *"`},
		{schema.MaintenanceWindow{Schedule: "@daily", Duration: "-1h"}, `duration "-1h": must be above 0`},
	} {
		_, err := New(tc.spec)
		require.Error(t, err)
		assert.Contains(t, err.Error(), tc.want)
	}
}

func TestSelectsAndEqual(t *testing.T) {
	a, err := New(schema.MaintenanceWindow{Schedule: "@daily", Duration: "1h", NodeSelector: map[string]string{"site": "x"}})
	require.NoError(t, err)
	b, err := New(schema.MaintenanceWindow{Schedule: "@daily", Duration: "1h", NodeSelector: map[string]string{"site": "y"}})
	require.NoError(t, err)
	assert.True(t, a.Selects(map[string]string{"site": "x"}))
	assert.False(t, a.Selects(map[string]string{"site": "y"}))
	assert.True(t, a.Equal(a))
	assert.False(t, a.Equal(b))
}
