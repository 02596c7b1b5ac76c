package schema

import (
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones the cases name, whatever the host has

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidateSchedulePolicy(t *testing.T) {
	tests := []struct {
		name   string
		policy RolloutPolicy
		want   []string
	}{
		{"valid", RolloutPolicy{
			MaxUnavailablePerTopology: &TopologyBudget{TopologyKey: "edgeset.io/site", MaxUnavailable: ptr(FromString("25%"))},
			MaintenanceWindows: []MaintenanceWindow{
				{Schedule: "0 2 * * *", Duration: "2h", TimeZone: "Europe/Berlin", NodeSelector: map[string]string{"region": "eu"}},
				{Schedule: "@daily", Duration: "30m"},
			},
		}, nil},
		{"topology budget", RolloutPolicy{MaxUnavailablePerTopology: &TopologyBudget{TopologyKey: "bad key!", MaxUnavailable: ptr(FromInt(0))}}, []string{
			"spec.rollout.maxUnavailablePerTopology.topologyKey: ",
			"spec.rollout.maxUnavailablePerTopology.maxUnavailable: must be at least 1 or a percentage above 0%, not 0",
		}},
		{"topology budget missing", RolloutPolicy{MaxUnavailablePerTopology: &TopologyBudget{}}, []string{
			"spec.rollout.maxUnavailablePerTopology.topologyKey: required",
			"spec.rollout.maxUnavailablePerTopology.maxUnavailable: required",
		}},
		{"topology percentage", RolloutPolicy{MaxUnavailablePerTopology: &TopologyBudget{TopologyKey: "site", MaxUnavailable: ptr(FromString("150%"))}}, []string{
			`spec.rollout.maxUnavailablePerTopology.maxUnavailable: must not be more than 100%, not "150%"`,
		}},
		{"window fields", RolloutPolicy{MaintenanceWindows: []MaintenanceWindow{
			{Schedule: "0 2 * *", Duration: "2 hours", TimeZone: "Mars/Olympus", NodeSelector: map[string]string{"region": "eu west"}},
			{Schedule: "CRON_TZ=Europe/Berlin 0 2 * * *", Duration: "0s", TimeZone: "Local"},
			{Duration: "169h"},
			{Schedule: "0 0 30 2 *", Duration: "1h"},
		}}, []string{
			`spec.rollout.maintenanceWindows[0].timeZone: unknown time zone "Mars/Olympus"`,
			`spec.rollout.maintenanceWindows[0].schedule: invalid schedule "0 2 * *"`,
			`spec.rollout.maintenanceWindows[0].duration: invalid duration "2 hours"`,
			`spec.rollout.maintenanceWindows[0].nodeSelector[region]: `,
			`spec.rollout.maintenanceWindows[1].timeZone: unknown time zone "Local"`,
			`spec.rollout.maintenanceWindows[1].schedule: invalid schedule "CRON_TZ=Europe/Berlin 0 2 * * *": a time zone in the schedule`,
			`spec.rollout.maintenanceWindows[1].duration: must be above 0 and at most 168h0m0s, not 0s`,
			`spec.rollout.maintenanceWindows[2].schedule: required`,
			`spec.rollout.maintenanceWindows[2].duration: must be above 0 and at most 168h0m0s, not 169h`,
			`spec.rollout.maintenanceWindows[3].schedule: schedule "0 0 30 2 *" never fires`,
		}},
		{"too many windows", RolloutPolicy{MaintenanceWindows: make([]MaintenanceWindow, MaxMaintenanceWindows+1)}, []string{
			"spec.rollout.maintenanceWindows: at most 16 windows, not 17",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds := validDS()
			ds.Spec.Rollout = &tc.policy
			err := ValidateDaemonSet(ds)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			got := problems(t, err)
			require.Len(t, got, len(tc.want), "problems: %q", got)
			for i, prefix := range tc.want {
				assert.True(t, strings.HasPrefix(got[i], prefix), "problem %d: %q does not start with %q", i, got[i], prefix)
			}
		})
	}
}

func TestDecodeSchedulePolicy(t *testing.T) {
	extra := `  rollout:
    maxUnavailablePerTopology: {topologyKey: site, maxUnavailable: 1}
    maintenanceWindows:
    - schedule: "0 2 * * *"
      duration: 2h
      timeZone: Europe/Berlin
      nodeSelector: {region: eu}
`
	objs, warnings, err := Decode("x.yaml", []byte(minimalDS("edgeset.io/v1", extra)))
	require.NoError(t, err)
	assert.Empty(t, warnings, "every field is known")
	r := objs[0].DaemonSet.Spec.Rollout
	require.NotNil(t, r.MaxUnavailablePerTopology)
	assert.Equal(t, TopologyBudget{TopologyKey: "site", MaxUnavailable: ptr(FromInt(1))}, *r.MaxUnavailablePerTopology)
	assert.Equal(t, []MaintenanceWindow{{Schedule: "0 2 * * *", Duration: "2h", TimeZone: "Europe/Berlin",
		NodeSelector: map[string]string{"region": "eu"}}}, r.MaintenanceWindows)

	_, _, err = Decode("x.yaml", []byte(minimalDS("apps/v1", extra)))
	assert.Contains(t, problems(t, err), "x.yaml:13: spec.rollout: only allowed with apiVersion edgeset.io/v1, not apps/v1")
}

// TestSchedulePolicyKeepsRevision: budgets and windows are rollout
// strategy, not pod template: they do not change the revision hash.
func TestSchedulePolicyKeepsRevision(t *testing.T) {
	ds := validDS()
	before := TemplateHash(ds.Spec.Template)
	ds.Spec.Rollout = &RolloutPolicy{
		MaxUnavailablePerTopology: &TopologyBudget{TopologyKey: "site", MaxUnavailable: ptr(FromInt(1))},
		MaintenanceWindows:        []MaintenanceWindow{{Schedule: "@daily", Duration: "1h"}},
	}
	assert.Equal(t, before, TemplateHash(ds.Spec.Template))
}

func TestParseScheduleInZone(t *testing.T) {
	berlin, err := LoadWindowLocation("Europe/Berlin")
	require.NoError(t, err)
	sched, err := ParseSchedule("0 2 * * *", berlin)
	require.NoError(t, err)
	from := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	assert.Equal(t, time.Date(2026, 3, 2, 1, 0, 0, 0, time.UTC), sched.Next(from).UTC(), "02:00 CET is 01:00 UTC")
	utc, err := LoadWindowLocation("")
	require.NoError(t, err)
	assert.Equal(t, time.UTC, utc)
}

func TestWindowSelects(t *testing.T) {
	w := MaintenanceWindow{NodeSelector: map[string]string{"region": "eu"}}
	assert.True(t, w.WindowSelects(map[string]string{"region": "eu", "site": "a"}))
	assert.False(t, w.WindowSelects(map[string]string{"region": "us"}))
	assert.False(t, w.WindowSelects(nil))
	assert.True(t, (&MaintenanceWindow{}).WindowSelects(nil), "no selector selects every node")
}
