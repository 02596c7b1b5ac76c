package schema

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// agentDS is a valid revision of the agent's daemonset naming an amd64
// and an arm/v7 binary of v2; tests mutate it.
func agentDS() *DaemonSet {
	labels := map[string]string{"app.kubernetes.io/name": AgentName}
	return &DaemonSet{
		TypeMeta: TypeMeta{APIVersion: APIVersionEdgeset, Kind: KindDaemonSet},
		Metadata: ObjectMeta{Name: AgentName, Namespace: AgentNamespace},
		Spec: DaemonSetSpec{
			Selector: &LabelSelector{MatchLabels: labels},
			Template: PodTemplateSpec{
				Metadata: ObjectMeta{Labels: labels, Annotations: map[string]string{
					AnnotationAgentVersion:                       "v2.0.1+build.7",
					AnnotationAgentDigestPrefix + "linux-amd64":  digestA,
					AnnotationAgentDigestPrefix + "linux-arm-v7": digestB,
					AnnotationAgentTrialDeadline:                 "90s",
					AnnotationAgentTrialAttempts:                 "4",
				}},
				Spec: PodSpec{Containers: []Container{
					{Name: "linux-amd64", Image: AgentBinaryImage("v2.0.1+build.7", "linux-amd64", digestA)},
					{Name: "linux-arm-v7", Image: AgentBinaryImage("v2.0.1+build.7", "linux-arm-v7", digestB)},
				}},
			},
		},
	}
}

func TestParseAgentUpgrade(t *testing.T) {
	u, err := ParseAgentUpgrade(agentDS().Spec.Template)
	require.NoError(t, err)
	assert.Equal(t, AgentUpgrade{Version: "v2.0.1+build.7", TrialDeadline: 90 * time.Second, TrialAttempts: 4, Binaries: map[string]AgentBinary{
		"linux-amd64":  {Image: "edgeset.io/edgeset-agent:v2.0.1-build.7-linux-amd64-aaaaaaaaaaaa", Digest: digestA},
		"linux-arm-v7": {Image: "edgeset.io/edgeset-agent:v2.0.1-build.7-linux-arm-v7-bbbbbbbbbbbb", Digest: digestB},
	}}, u)
	assert.Equal(t, []string{"linux-amd64", "linux-arm-v7"}, u.Platforms())
	assert.False(t, u.Baseline())

	ds := agentDS()
	delete(ds.Spec.Template.Metadata.Annotations, AnnotationAgentTrialDeadline)
	delete(ds.Spec.Template.Metadata.Annotations, AnnotationAgentTrialAttempts)
	u, err = ParseAgentUpgrade(ds.Spec.Template)
	require.NoError(t, err)
	assert.Equal(t, DefaultAgentTrialDeadline, u.TrialDeadline)
	assert.Equal(t, DefaultAgentTrialAttempts, u.TrialAttempts)

	baseline := PodTemplateSpec{Spec: PodSpec{Containers: []Container{{Name: AgentBaselineContainer, Image: AgentBaselineImage}}}}
	u, err = ParseAgentUpgrade(baseline)
	require.NoError(t, err)
	assert.True(t, u.Baseline())
}

// TestValidateAgentDaemonSet: the reserved daemonset is refused, with
// every problem named by its field, unless its template describes an
// agent upgrade.
func TestValidateAgentDaemonSet(t *testing.T) {
	ann := "spec.template.metadata.annotations"
	cases := []struct {
		name   string
		mutate func(ds *DaemonSet)
		want   []string
	}{
		{"valid", func(*DaemonSet) {}, nil},
		{"another name is an ordinary daemonset", func(ds *DaemonSet) {
			ds.Metadata.Name = "not-the-agent"
			ds.Spec.Template.Spec.Containers[0].Name = "nginx"
		}, nil},
		{"container not a platform", func(ds *DaemonSet) { ds.Spec.Template.Spec.Containers[0].Name = "agent" }, []string{
			`spec.template.spec.containers[0].name: "agent" is not a platform such as linux-amd64, linux-arm64 or linux-arm-v7: each container of the agent's daemonset names the platform of one binary`,
			ann + `[agent.edgeset.io/digest.linux-amd64]: no container "linux-amd64" holds the binary of this digest`,
		}},
		{"variant on a non-arm platform", func(ds *DaemonSet) { ds.Spec.Template.Spec.Containers[0].Name = "linux-amd64-v7" }, []string{
			`spec.template.spec.containers[0].name: "linux-amd64-v7" is not a platform such as linux-amd64, linux-arm64 or linux-arm-v7: each container of the agent's daemonset names the platform of one binary`,
			ann + `[agent.edgeset.io/digest.linux-amd64]: no container "linux-amd64" holds the binary of this digest`,
		}},
		{"missing digest", func(ds *DaemonSet) {
			delete(ds.Spec.Template.Metadata.Annotations, AnnotationAgentDigestPrefix+"linux-arm-v7")
		}, []string{ann + `[agent.edgeset.io/digest.linux-arm-v7]: the digest of the linux-arm-v7 binary: "" is not sha256: and 64 lowercase hex digits`}},
		{"bad digest, version, deadline, attempts", func(ds *DaemonSet) {
			a := ds.Spec.Template.Metadata.Annotations
			a[AnnotationAgentDigestPrefix+"linux-amd64"] = "sha256:ABC"
			a[AnnotationAgentVersion] = "v 2"
			a[AnnotationAgentTrialDeadline] = "1s"
			a[AnnotationAgentTrialAttempts] = "0"
		}, []string{
			ann + `[agent.edgeset.io/version]: invalid agent version "v 2": 1-128 letters, digits, '.', '_', '+' and '-', starting with a letter or digit`,
			ann + `[agent.edgeset.io/trial-deadline]: invalid duration "1s": between 5s and 24h0m0s, such as 5m`,
			ann + `[agent.edgeset.io/trial-attempts]: invalid count "0": from 1 to 10 starts`,
			ann + `[agent.edgeset.io/digest.linux-amd64]: the digest of the linux-amd64 binary: "sha256:ABC" is not sha256: and 64 lowercase hex digits`,
		}},
		{"a surge pair would run two agents", func(ds *DaemonSet) {
			one := FromInt(1)
			ds.Spec.UpdateStrategy = DaemonSetUpdateStrategy{Type: RollingUpdateStrategy, RollingUpdate: &RollingUpdateDaemonSet{MaxSurge: &one}}
		}, []string{"spec.updateStrategy.rollingUpdate.maxSurge: must be 0 for edgeset-system/edgeset-agent: a node runs one agent"}},
		{"containers beside the binaries", func(ds *DaemonSet) {
			ds.Spec.Template.Spec.InitContainers = []Container{{Name: "init", Image: "busybox"}}
		}, []string{"spec.template.spec.initContainers: not allowed: the agent's daemonset runs no container, only the agent binary"}},
		{"baseline with a binary", func(ds *DaemonSet) {
			delete(ds.Spec.Template.Metadata.Annotations, AnnotationAgentVersion)
			ds.Spec.Template.Spec.Containers = []Container{{Name: AgentBaselineContainer, Image: AgentBaselineImage}}
		}, []string{
			ann + "[agent.edgeset.io/digest.linux-amd64]: a binary without agent.edgeset.io/version: name the version the binaries report",
			ann + "[agent.edgeset.io/digest.linux-arm-v7]: a binary without agent.edgeset.io/version: name the version the binaries report",
		}},
		{"baseline with another container", func(ds *DaemonSet) {
			ds.Spec.Template.Metadata.Annotations = nil
		}, []string{`spec.template.spec.containers: the baseline revision (no agent.edgeset.io/version annotation) has one container, "installed"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ds := agentDS()
			tc.mutate(ds)
			err := ValidateDaemonSet(ds)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			var ve *ValidationError
			require.True(t, errors.As(err, &ve), "%v", err)
			var got []string
			for _, fe := range ve.Errors {
				got = append(got, fe.Field+": "+fe.Message)
			}
			assert.ElementsMatch(t, tc.want, got)
		})
	}
}

func TestAgentPlatforms(t *testing.T) {
	for _, tc := range []struct{ goos, goarch, goarm, name, display string }{
		{"linux", "amd64", "", "linux-amd64", "linux/amd64"},
		{"linux", "arm64", "", "linux-arm64", "linux/arm64"},
		{"linux", "arm", "7", "linux-arm-v7", "linux/arm/v7"},
		{"linux", "arm", "", "linux-arm", "linux/arm"},
		{"linux", "amd64", "7", "linux-amd64", "linux/amd64"},
	} {
		p := AgentPlatform(tc.goos, tc.goarch, tc.goarm)
		assert.Equal(t, tc.name, p)
		assert.Equal(t, tc.display, DisplayAgentPlatform(p))
		goos, goarch, goarm, ok := SplitAgentPlatform(p)
		assert.True(t, ok, p)
		assert.Equal(t, []string{tc.goos, tc.goarch}, []string{goos, goarch})
		if tc.goarch == "arm" {
			assert.Equal(t, tc.goarm, goarm)
		}
	}
	for _, bad := range []string{"", "linux", "linux-amd64-v7", "Linux-amd64", "linux-arm-v8", "linux/amd64"} {
		_, _, _, ok := SplitAgentPlatform(bad)
		assert.False(t, ok, bad)
	}
	long := AgentBinaryImage(strings.Repeat("v", 128), "linux-arm-v7", digestB)
	assert.LessOrEqual(t, len(strings.SplitN(long, ":", 2)[1]), 128, "a tag holds at most 128 characters")
	assert.True(t, strings.HasSuffix(long, "-linux-arm-v7-bbbbbbbbbbbb"))
}
