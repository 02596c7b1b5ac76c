package schema

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodePrefetchPolicy(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  PrefetchPolicy
		json  string
	}{
		{"true", "true", PrefetchPolicy{Enabled: true}, `true`},
		{"false", "false", PrefetchPolicy{}, `false`},
		{"object", "{maxConcurrentPerSite: 3, topologyKey: edgeset.io/site}",
			PrefetchPolicy{Enabled: true, MaxConcurrentPerSite: ptr(int32(3)), TopologyKey: "edgeset.io/site"},
			`{"maxConcurrentPerSite":3,"topologyKey":"edgeset.io/site"}`},
		{"empty object", "{}", PrefetchPolicy{Enabled: true}, `true`},
		{"concurrency only", "{maxConcurrentPerSite: 1}", PrefetchPolicy{Enabled: true, MaxConcurrentPerSite: ptr(int32(1))},
			`{"maxConcurrentPerSite":1}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs, warnings, err := Decode("x.yaml", []byte(minimalDS("edgeset.io/v1", "  rollout:\n    prefetch: "+tc.value+"\n")))
			require.NoError(t, err)
			assert.Empty(t, warnings)
			got := objs[0].DaemonSet.Spec.Rollout.Prefetch
			require.NotNil(t, got)
			assert.Equal(t, tc.want, *got)
			assert.Equal(t, tc.want.Enabled, got.On())

			b, err := json.Marshal(got)
			require.NoError(t, err)
			assert.JSONEq(t, tc.json, string(b))
			var back PrefetchPolicy
			require.NoError(t, json.Unmarshal(b, &back))
			assert.Equal(t, tc.want, back, "a stored daemonset reads back the same")
		})
	}
}

func TestDecodePrefetchPolicyErrors(t *testing.T) {
	tests := []struct {
		name, apiVersion, value string
		want                    []string
	}{
		{"not a boolean", "edgeset.io/v1", `"yes"`, []string{
			"x.yaml:14: spec.rollout.prefetch: must be a boolean (true or false)"}},
		{"a list", "edgeset.io/v1", `[1]`, []string{
			"x.yaml:14: spec.rollout.prefetch: must be true, false or an object with maxConcurrentPerSite and topologyKey"}},
		{"unknown field", "edgeset.io/v1", `{maxConcurrent: 2}`, []string{
			"x.yaml:14: spec.rollout.prefetch.maxConcurrent: unknown field"}},
		{"bad values", "edgeset.io/v1", `{maxConcurrentPerSite: 0, topologyKey: "bad key"}`, []string{
			"x.yaml:14: spec.rollout.prefetch.maxConcurrentPerSite: must be between 1 and 10000, not 0",
			"x.yaml:14: spec.rollout.prefetch.topologyKey: "}},
		{"apps/v1", "apps/v1", `true`, []string{
			"x.yaml:13: spec.rollout: only allowed with apiVersion edgeset.io/v1, not apps/v1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Decode("x.yaml", []byte(minimalDS(tc.apiVersion, "  rollout:\n    prefetch: "+tc.value+"\n")))
			require.Error(t, err)
			got := problems(t, err)
			require.Len(t, got, len(tc.want), "problems: %q", got)
			for i, prefix := range tc.want {
				assert.True(t, strings.HasPrefix(got[i], prefix), "problem %d: %q does not start with %q", i, got[i], prefix)
			}
		})
	}
}

func TestPrefetchPolicyDefaults(t *testing.T) {
	var none *PrefetchPolicy
	assert.False(t, none.On())
	assert.Equal(t, DefaultPrefetchConcurrency, none.Concurrency())
	assert.Equal(t, 7, (&PrefetchPolicy{Enabled: true, MaxConcurrentPerSite: ptr(int32(7))}).Concurrency())
	assert.False(t, (&PrefetchPolicy{}).On(), "prefetch: false")
}

// TestPrefetchPolicyKeepsRevision: prefetching is rollout strategy, not
// pod template: it does not change the revision hash.
func TestPrefetchPolicyKeepsRevision(t *testing.T) {
	ds := validDS()
	before := TemplateHash(ds.Spec.Template)
	ds.Spec.Rollout = &RolloutPolicy{Prefetch: &PrefetchPolicy{Enabled: true}}
	assert.Equal(t, before, TemplateHash(ds.Spec.Template))
}

func TestDecodeWirePrefetch(t *testing.T) {
	const rev = "468ab83efb1e5e6fe0f1"
	desired := `{"schemaVersion":1,"node":"pi-01","generation":2,"instances":[],` +
		`"prefetch":[{"daemonSet":"edge/agent","revision":"` + rev + `"},{"daemonSet":"edge/agent","revision":"bad"}]}`
	_, err := DecodeDesiredState([]byte(desired))
	require.Error(t, err)
	got := problems(t, err)
	assert.Equal(t, []string{
		`prefetch[1].revision: invalid revision hash "bad": want 20 lowercase hex digits`,
		"prefetch[1].daemonSet: daemonset edge/agent is listed twice: one prefetch per daemonset",
	}, got)

	observed := `{"schemaVersion":1,"node":"pi-01","observedGeneration":2,"instances":[],"prefetch":[` +
		`{"daemonSet":"edge/agent","revision":"` + rev + `","bytesDone":-1,"bytesTotal":-2},` +
		`{"daemonSet":"edge/agent","revision":"` + rev + `","bytesDone":0}]}`
	_, err = DecodeObservedState([]byte(observed))
	require.Error(t, err)
	assert.Equal(t, []string{
		"prefetch[0].bytesDone: must be >= 0, not -1",
		"prefetch[0].bytesTotal: must be >= 0, not -2",
		"prefetch[1]: duplicate report of edge/agent revision " + rev,
	}, problems(t, err))
}

// TestPrefetchNotForTheAgentDaemonSet: the reserved daemonset of agent
// upgrades runs no container image, so nothing can be prefetched for it.
func TestPrefetchNotForTheAgentDaemonSet(t *testing.T) {
	ds := agentDS()
	ds.Spec.Rollout = &RolloutPolicy{Prefetch: &PrefetchPolicy{Enabled: true}}
	err := ValidateDaemonSet(ds)
	require.Error(t, err)
	assert.Equal(t, []string{"spec.rollout.prefetch: not for edgeset-system/edgeset-agent: an agent upgrade runs no container image " +
		"(each agent downloads its new binary when switched)"}, problems(t, err))
	ds.Spec.Rollout.Prefetch.Enabled = false
	assert.NoError(t, ValidateDaemonSet(ds), "prefetch: false is allowed")
}
