package schema

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPercentOutOfRange: a percentage too large for an integer used to
// parse as "not a percentage", pass validation as 0% and then resolve to
// an arbitrary value. Every int-or-percent field refuses it, naming the
// field.
func TestPercentOutOfRange(t *testing.T) {
	const huge = "99999999999999999999%"
	tests := []struct {
		name  string
		extra string
		want  []string
	}{
		{"maxUnavailable", "  updateStrategy:\n    rollingUpdate:\n      maxUnavailable: " + huge + "\n",
			[]string{`x.yaml:15: spec.updateStrategy.rollingUpdate.maxUnavailable: must not be more than 100%, not "` + huge + `"`}},
		{"maxSurge quoted", "  updateStrategy:\n    rollingUpdate:\n      maxSurge: \"" + huge + "\"\n",
			[]string{`x.yaml:15: spec.updateStrategy.rollingUpdate.maxSurge: must not be more than 100%, not "` + huge + `"`}},
		{"failureThreshold", "  rollout:\n    failureThreshold: " + huge + "\n",
			[]string{`x.yaml:14: spec.rollout.failureThreshold: must not be more than 100%, not "` + huge + `"`}},
		{"canary nodes", "  rollout:\n    canary: {nodes: " + huge + "}\n",
			[]string{`x.yaml:14: spec.rollout.canary.nodes: must not be more than 100%, not "` + huge + `"`}},
		{"percent just past int32", "  updateStrategy:\n    rollingUpdate:\n      maxUnavailable: 2147483648%\n",
			[]string{`x.yaml:15: spec.updateStrategy.rollingUpdate.maxUnavailable: must not be more than 100%, not "2147483648%"`}},
		{"integer field too large for int64", "  minReadySeconds: 99999999999999999999\n",
			[]string{"x.yaml:13: spec.minReadySeconds: must be an integer between -2147483648 and 2147483647, not 99999999999999999999"}},
		{"negative integer field too large for int64", "  rollout:\n    progressDeadlineSeconds: -99999999999999999999\n",
			[]string{"x.yaml:14: spec.rollout.progressDeadlineSeconds: must be an integer between -2147483648 and 2147483647, not -99999999999999999999"}},
		{"int-or-string too large for int64", "  updateStrategy:\n    rollingUpdate:\n      maxUnavailable: 99999999999999999999\n",
			[]string{"x.yaml:15: spec.updateStrategy.rollingUpdate.maxUnavailable: must be an integer between -2147483648 and 2147483647, not 99999999999999999999"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Decode("x.yaml", []byte(minimalDS("edgeset.io/v1", tc.extra)))
			assert.Equal(t, tc.want, problems(t, err))
		})
	}
}

func TestIntOrStringPercentAndScaled(t *testing.T) {
	tests := []struct {
		in     IntOrString
		pct    int
		ok     bool
		scaled int // of 10, rounded up; -1 for an error
	}{
		{FromString("25%"), 25, true, 3},
		{FromString("0%"), 0, true, 0},
		{FromString("100%"), 100, true, 10},
		{FromString("007%"), 7, true, 1},
		{FromString("2147483647%"), 2147483647, true, 214748365},
		{FromString("2147483648%"), 0, false, -1},
		{FromString("99999999999999999999%"), 0, false, -1},
		{FromString("-5%"), 0, false, -1},
		{FromString("+5%"), 0, false, -1},
		{FromString("5"), 0, false, -1},
		{FromString("%"), 0, false, -1},
		{FromInt(4), 0, false, 4},
	}
	for _, tc := range tests {
		t.Run(tc.in.String(), func(t *testing.T) {
			pct, ok := tc.in.Percent()
			assert.Equal(t, tc.ok, ok, "Percent ok")
			assert.Equal(t, tc.pct, pct, "Percent")
			n, err := tc.in.Scaled(10, true)
			if tc.scaled < 0 {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.in.StrVal, "the error names the value")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.scaled, n)
		})
	}
}

func TestQuantityExponentOverflowNamed(t *testing.T) {
	_, err := Quantity("1e99999999999999999999").Value()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exponent out of range")
}

// TestNodeSelectorGtOutOfRange: a Gt/Lt value too large for an int64 is
// named as out of range, not as "not an integer".
func TestNodeSelectorGtOutOfRange(t *testing.T) {
	ds := validDS()
	ds.Spec.Template.Spec.Affinity = &Affinity{NodeAffinity: &NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &NodeSelector{
		NodeSelectorTerms: []NodeSelectorTerm{{MatchExpressions: []NodeSelectorRequirement{{Key: "cores", Operator: NodeOpGt, Values: []string{"99999999999999999999"}}}}},
	}}}
	err := ValidateDaemonSet(ds)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `values[0]: must be an integer between -9223372036854775808 and 9223372036854775807 for operator Gt, not "99999999999999999999"`)
}
