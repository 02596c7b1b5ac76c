package schema

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// validDS returns a daemonset that passes validation; tests mutate it.
func validDS() *DaemonSet {
	return &DaemonSet{
		TypeMeta: TypeMeta{APIVersion: APIVersionEdgeset, Kind: KindDaemonSet},
		Metadata: ObjectMeta{Name: "agent", Namespace: "edge", Labels: map[string]string{"app": "agent"}},
		Spec: DaemonSetSpec{
			Selector: &LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: PodTemplateSpec{
				Metadata: ObjectMeta{Labels: map[string]string{"app": "agent", "tier": "edge"}},
				Spec: PodSpec{
					Containers: []Container{{
						Name:         "agent",
						Image:        "example.com/agent:1.0",
						Ports:        []ContainerPort{{Name: "http", ContainerPort: 8080, HostPort: 8080}},
						VolumeMounts: []VolumeMount{{Name: "data", MountPath: "/data"}},
						LivenessProbe: &Probe{
							HTTPGet: &HTTPGetAction{Path: "/healthz", Port: FromString("http")},
						},
						Resources: ResourceRequirements{
							Requests: ResourceList{"cpu": "100m", "memory": "64Mi"},
							Limits:   ResourceList{"cpu": "1", "memory": "128Mi"},
						},
					}},
					Volumes:     []Volume{{Name: "data", HostPath: &HostPathVolumeSource{Path: "/var/lib/agent"}}},
					Tolerations: []Toleration{{Key: "edgeset.io/battery", Operator: TolerationOpEqual, Value: "low", Effect: TaintNoExecute, TolerationSeconds: ptr(int64(60))}},
				},
			},
		},
	}
}

func TestValidateDaemonSetValid(t *testing.T) {
	ds := validDS()
	require.NoError(t, ValidateDaemonSet(ds))
	SetDefaults(ds)
	require.NoError(t, ValidateDaemonSet(ds), "defaults keep a daemonset valid")
}

func TestValidateDaemonSetProblems(t *testing.T) {
	c0 := "spec.template.spec.containers[0]"
	tests := []struct {
		name   string
		mutate func(ds *DaemonSet)
		want   []string // "field: message" of every problem
	}{
		{"missing name", func(ds *DaemonSet) { ds.Metadata.Name = "" }, []string{"metadata.name: required"}},
		{"long namespace", func(ds *DaemonSet) { ds.Metadata.Namespace = strings.Repeat("a", 64) }, []string{
			`metadata.namespace: invalid namespace "` + strings.Repeat("a", 64) + `": must be a DNS-1123 label (lowercase alphanumerics and '-', at most 63 characters)`,
		}},
		{"bad label key", func(ds *DaemonSet) { ds.Metadata.Labels["-x"] = "y" }, []string{
			`metadata.labels[-x]: invalid label key "-x": name must be 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric`,
		}},
		{"bad label value", func(ds *DaemonSet) { ds.Metadata.Labels["ok"] = "a b" }, []string{
			`metadata.labels[ok]: invalid label value "a b": must be empty or 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric`,
		}},
		{"no selector", func(ds *DaemonSet) { ds.Spec.Selector = nil }, []string{"spec.selector: required"}},
		{"empty selector", func(ds *DaemonSet) { ds.Spec.Selector = &LabelSelector{} }, []string{
			"spec.selector: empty selector: it must select the template's labels with matchLabels or matchExpressions",
		}},
		{"selector expression does not match", func(ds *DaemonSet) {
			ds.Spec.Selector.MatchExpressions = []LabelSelectorRequirement{{Key: "tier", Operator: LabelOpNotIn, Values: []string{"edge"}}}
		}, []string{"spec.template.metadata.labels: selector does not match template labels: spec.selector must select them"}},
		{"selector expression problems", func(ds *DaemonSet) {
			ds.Spec.Selector.MatchExpressions = []LabelSelectorRequirement{
				{Key: "tier", Operator: LabelOpIn},
				{Key: "tier", Operator: LabelOpExists, Values: []string{"x"}},
				{Key: "tier", Operator: "Has"},
			}
		}, []string{
			"spec.selector.matchExpressions[0].values: must be non-empty for operator In",
			"spec.selector.matchExpressions[1].values: must be empty for operator Exists",
			`spec.selector.matchExpressions[2].operator: unsupported operator "Has": want In, NotIn, Exists or DoesNotExist`,
		}},
		{"no containers", func(ds *DaemonSet) { ds.Spec.Template.Spec.Containers = nil }, []string{
			"spec.template.spec.containers: required: at least one container",
		}},
		{"container name not a label", func(ds *DaemonSet) { ds.Spec.Template.Spec.Containers[0].Name = "Agent" }, []string{
			c0 + `.name: invalid container name "Agent": must be a DNS-1123 label (lowercase alphanumerics and '-', at most 63 characters)`,
		}},
		{"container port range", func(ds *DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].Ports = []ContainerPort{{ContainerPort: 0}, {ContainerPort: 53, Protocol: ProtocolUDP}}
		}, []string{c0 + ".ports[0].containerPort: must be between 1 and 65535, not 0"}},
		{"port names", func(ds *DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].Ports = []ContainerPort{{Name: "a--b", ContainerPort: 1}, {Name: "x", ContainerPort: 2}, {Name: "x", ContainerPort: 3}}
		}, []string{
			c0 + `.ports[0].name: invalid port name "a--b": must be at most 15 lowercase alphanumerics or '-', with a letter and no '--'`,
			c0 + `.ports[2].name: duplicate port name "x"`,
		}},
		{"request above limit", func(ds *DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].Resources.Requests["memory"] = "1Gi"
		}, []string{c0 + ".resources.requests[memory]: must be less than or equal to the limit 128Mi"}},
		{"negative quantity", func(ds *DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].Resources.Limits["cpu"] = "-1"
		}, []string{c0 + `.resources.limits[cpu]: must not be negative, not "-1"`}},
		{"probe with two handlers and bad port", func(ds *DaemonSet) {
			p := ds.Spec.Template.Spec.Containers[0].LivenessProbe
			p.TCPSocket = &TCPSocketAction{Port: FromInt(0)}
			p.TimeoutSeconds = -1
		}, []string{
			c0 + ".livenessProbe.tcpSocket.port: must be between 1 and 65535, not 0",
			c0 + ".livenessProbe: must have exactly one handler (exec, httpGet or tcpSocket), has 2",
			c0 + ".livenessProbe.timeoutSeconds: must be >= 0, not -1",
		}},
		{"exec probe without command", func(ds *DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].ReadinessProbe = &Probe{Exec: &ExecAction{}}
		}, []string{c0 + ".readinessProbe.exec.command: required"}},
		{"toleration problems", func(ds *DaemonSet) {
			ds.Spec.Template.Spec.Tolerations = []Toleration{
				{Operator: TolerationOpEqual, Value: "x"},
				{Operator: "Matches", Effect: "Evict"},
				{Operator: TolerationOpExists}, // tolerates everything: valid
			}
		}, []string{
			"spec.template.spec.tolerations[0].key: required unless operator is Exists",
			`spec.template.spec.tolerations[1].operator: unsupported operator "Matches": want Equal or Exists`,
			`spec.template.spec.tolerations[1].effect: unsupported effect "Evict": want NoSchedule, PreferNoSchedule, NoExecute or empty (all effects)`,
		}},
		{"node affinity operators", func(ds *DaemonSet) {
			ds.Spec.Template.Spec.Affinity = &Affinity{NodeAffinity: &NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &NodeSelector{
				NodeSelectorTerms: []NodeSelectorTerm{
					{MatchExpressions: []NodeSelectorRequirement{
						{Key: "a", Operator: NodeOpLt, Values: []string{"1", "2"}},
						{Key: "b", Operator: NodeOpDoesNotExist, Values: []string{"x"}},
						{Key: "c", Operator: NodeOpNotIn},
						{Key: "d", Operator: NodeOpGt, Values: []string{"10"}},
					}},
					{MatchFields: []NodeSelectorRequirement{{Key: "metadata.name", Operator: NodeOpIn, Values: []string{"n1"}}}},
					{},
				},
			}}}
		}, []string{
			"spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values: must have exactly one value for operator Lt",
			"spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[1].values: must be empty for operator DoesNotExist",
			"spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[2].values: must be non-empty for operator NotIn",
			"spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[2]: must have matchExpressions or matchFields",
		}},
		{"node selector label syntax", func(ds *DaemonSet) {
			ds.Spec.Template.Spec.NodeSelector = map[string]string{"Bad Key": "v"}
		}, []string{
			`spec.template.spec.nodeSelector[Bad Key]: invalid label key "Bad Key": name must be 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric`,
		}},
		{"volume problems", func(ds *DaemonSet) {
			ds.Spec.Template.Spec.Volumes = append(ds.Spec.Template.Spec.Volumes,
				Volume{Name: "data", HostPath: &HostPathVolumeSource{Path: "/x", Type: "Pipe"}},
				Volume{Name: "empty"},
				Volume{Name: "two", HostPath: &HostPathVolumeSource{Path: "/y"}, EmptyDir: &EmptyDirVolumeSource{}})
		}, []string{
			`spec.template.spec.volumes[1].name: duplicate volume name "data"`,
			`spec.template.spec.volumes[1].hostPath.type: unsupported type "Pipe": want one of DirectoryOrCreate, Directory, FileOrCreate, File, Socket, CharDevice, BlockDevice`,
			"spec.template.spec.volumes[3]: must have exactly one volume source, has 2 (hostPath, emptyDir)",
		}},
		{"strategy type", func(ds *DaemonSet) { ds.Spec.UpdateStrategy.Type = "Recreate" }, []string{
			`spec.updateStrategy.type: unsupported type "Recreate": want RollingUpdate or OnDelete`,
		}},
		{"both zero", func(ds *DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate = &RollingUpdateDaemonSet{MaxUnavailable: ptr(FromString("0%")), MaxSurge: ptr(FromInt(0))}
		}, []string{"spec.updateStrategy.rollingUpdate.maxUnavailable: may not be 0 when maxSurge is 0"}},
		{"bad int-or-percent", func(ds *DaemonSet) {
			ds.Spec.UpdateStrategy.RollingUpdate = &RollingUpdateDaemonSet{MaxUnavailable: ptr(FromString("ten")), MaxSurge: ptr(FromInt(-1))}
		}, []string{
			`spec.updateStrategy.rollingUpdate.maxUnavailable: invalid value "ten": must be an integer or a percentage such as "10%"`,
			"spec.updateStrategy.rollingUpdate.maxSurge: must be >= 0, not -1",
		}},
		{"negative seconds", func(ds *DaemonSet) {
			ds.Spec.MinReadySeconds = -1
			ds.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr(int64(-1))
		}, []string{
			"spec.template.spec.terminationGracePeriodSeconds: must be >= 0, not -1",
			"spec.minReadySeconds: must be >= 0, not -1",
		}},
		{"rollout extension", func(ds *DaemonSet) {
			ds.Spec.MinReadySeconds = 30
			ds.Spec.Rollout = &RolloutPolicy{
				OfflineGraceSeconds:     ptr(int32(-1)),
				ProgressDeadlineSeconds: ptr(int32(30)),
				FailureThreshold:        ptr(FromString("101%")),
				Canary:                  &CanaryPolicy{Nodes: ptr(FromInt(0)), AutoPromoteSeconds: -1},
			}
		}, []string{
			"spec.rollout.offlineGraceSeconds: must be >= 0, not -1",
			"spec.rollout.progressDeadlineSeconds: must be greater than spec.minReadySeconds (30)",
			`spec.rollout.failureThreshold: must not be more than 100%, not "101%"`,
			"spec.rollout.canary.nodes: required: at least one node or a percentage above 0%",
			"spec.rollout.canary.autoPromoteSeconds: must be >= 0, not -1",
		}},
		{"rollout under apps/v1", func(ds *DaemonSet) {
			ds.APIVersion = APIVersionApps
			ds.Spec.Rollout = &RolloutPolicy{Paused: true}
		}, []string{"spec.rollout: only allowed with apiVersion edgeset.io/v1, not apps/v1"}},
		{"imageSource under apps/v1", func(ds *DaemonSet) {
			ds.APIVersion = APIVersionApps
			ds.Spec.Template.Spec.ImageSource = ImageSourceController
		}, []string{"spec.template.spec.imageSource: only allowed with apiVersion edgeset.io/v1, not apps/v1"}},
		{"imageSource unknown", func(ds *DaemonSet) {
			ds.APIVersion = APIVersionEdgeset
			ds.Spec.Template.Spec.ImageSource = "peer"
		}, []string{`spec.template.spec.imageSource: unsupported value "peer": must be registry or controller`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds := validDS()
			tc.mutate(ds)
			err := ValidateDaemonSet(ds)
			var ve *ValidationError
			require.True(t, errors.As(err, &ve), "got %v", err)
			var got []string
			for _, fe := range ve.Errors {
				got = append(got, fe.Error())
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestLabelSelectorMatches(t *testing.T) {
	labels := map[string]string{"app": "a", "tier": "edge"}
	tests := []struct {
		name string
		sel  *LabelSelector
		want bool
	}{
		{"nil", nil, false},
		{"matchLabels", &LabelSelector{MatchLabels: map[string]string{"app": "a"}}, true},
		{"matchLabels value differs", &LabelSelector{MatchLabels: map[string]string{"app": "b"}}, false},
		{"In", &LabelSelector{MatchExpressions: []LabelSelectorRequirement{{Key: "tier", Operator: LabelOpIn, Values: []string{"edge", "core"}}}}, true},
		{"NotIn absent key", &LabelSelector{MatchExpressions: []LabelSelectorRequirement{{Key: "zone", Operator: LabelOpNotIn, Values: []string{"x"}}}}, true},
		{"Exists", &LabelSelector{MatchExpressions: []LabelSelectorRequirement{{Key: "tier", Operator: LabelOpExists}}}, true},
		{"DoesNotExist", &LabelSelector{MatchExpressions: []LabelSelectorRequirement{{Key: "tier", Operator: LabelOpDoesNotExist}}}, false},
		{"unknown operator", &LabelSelector{MatchExpressions: []LabelSelectorRequirement{{Key: "tier", Operator: "Like"}}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.sel.Matches(labels))
		})
	}
}

func TestSetDefaults(t *testing.T) {
	ds := &DaemonSet{Spec: DaemonSetSpec{Template: PodTemplateSpec{Spec: PodSpec{Containers: []Container{{
		Image:         "app",
		Ports:         []ContainerPort{{ContainerPort: 80}},
		LivenessProbe: &Probe{TCPSocket: &TCPSocketAction{Port: FromInt(80)}, PeriodSeconds: 5},
	}}}}}}
	SetDefaults(ds)
	assert.Equal(t, DefaultNamespace, ds.Metadata.Namespace)
	assert.Equal(t, DaemonSetUpdateStrategy{Type: RollingUpdateStrategy, RollingUpdate: &RollingUpdateDaemonSet{
		MaxUnavailable: ptr(FromInt(1)), MaxSurge: ptr(FromInt(0)),
	}}, ds.Spec.UpdateStrategy)
	assert.Equal(t, int32(10), *ds.Spec.RevisionHistoryLimit)
	pod := ds.Spec.Template.Spec
	assert.Equal(t, RestartPolicyAlways, pod.RestartPolicy)
	assert.Equal(t, int64(30), *pod.TerminationGracePeriodSeconds)
	c := pod.Containers[0]
	assert.Equal(t, PullAlways, c.ImagePullPolicy)
	assert.Equal(t, ProtocolTCP, c.Ports[0].Protocol)
	assert.Equal(t, Probe{TCPSocket: &TCPSocketAction{Port: FromInt(80)}, TimeoutSeconds: 1, PeriodSeconds: 5, SuccessThreshold: 1, FailureThreshold: 3}, *c.LivenessProbe)

	again := *ds
	SetDefaults(&again)
	assert.Equal(t, ds, &again, "SetDefaults is idempotent")
}

func TestSetDefaultsKeepsOnDelete(t *testing.T) {
	ds := &DaemonSet{Spec: DaemonSetSpec{UpdateStrategy: DaemonSetUpdateStrategy{Type: OnDeleteStrategy}}}
	SetDefaults(ds)
	assert.Nil(t, ds.Spec.UpdateStrategy.RollingUpdate)
}

func TestDefaultImagePullPolicy(t *testing.T) {
	tests := []struct{ image, want string }{
		{"nginx", PullAlways},
		{"nginx:latest", PullAlways},
		{"nginx:1.27", PullIfNotPresent},
		{"registry.local:5000/nginx", PullAlways},
		{"registry.local:5000/nginx:1.0", PullIfNotPresent},
		{"nginx@sha256:0123abcd", PullIfNotPresent},
		{"nginx:latest@sha256:0123abcd", PullAlways},
	}
	for _, tc := range tests {
		t.Run(tc.image, func(t *testing.T) {
			c := Container{Image: tc.image}
			setContainerDefaults(&c)
			assert.Equal(t, tc.want, c.ImagePullPolicy)
		})
	}
}

func TestNameChecks(t *testing.T) {
	assert.True(t, IsDNS1123Label("a-1"))
	assert.False(t, IsDNS1123Label("a.b"))
	assert.False(t, IsDNS1123Label("-a"))
	assert.False(t, IsDNS1123Label(string(make([]byte, 64))))
	assert.True(t, IsDNS1123Subdomain("a.b-c.d"))
	assert.False(t, IsDNS1123Subdomain("a..b"))
	assert.False(t, IsDNS1123Subdomain(""))
	assert.Empty(t, LabelKeyProblem("app.kubernetes.io/name"))
	assert.NotEmpty(t, LabelKeyProblem("Bad_Prefix/name"))
	assert.NotEmpty(t, LabelKeyProblem("a/"))
	assert.Empty(t, LabelValueProblem(""))
}

func TestSetDefaultsNewFields(t *testing.T) {
	ds := &DaemonSet{Spec: DaemonSetSpec{Template: PodTemplateSpec{Spec: PodSpec{
		InitContainers: []Container{{Image: "setup:1", Ports: []ContainerPort{{ContainerPort: 1}}}},
		Containers:     []Container{{Image: "app:1", StartupProbe: &Probe{Exec: &ExecAction{Command: []string{"true"}}}}},
		Volumes:        []Volume{{Name: "scratch"}, {Name: "logs", HostPath: &HostPathVolumeSource{Path: "/var/log"}}},
	}}}}
	SetDefaults(ds)
	pod := ds.Spec.Template.Spec
	assert.Equal(t, PullIfNotPresent, pod.InitContainers[0].ImagePullPolicy)
	assert.Equal(t, ProtocolTCP, pod.InitContainers[0].Ports[0].Protocol)
	assert.Equal(t, Probe{Exec: &ExecAction{Command: []string{"true"}}, TimeoutSeconds: 1, PeriodSeconds: 10, SuccessThreshold: 1, FailureThreshold: 3}, *pod.Containers[0].StartupProbe)
	assert.Equal(t, &EmptyDirVolumeSource{}, pod.Volumes[0].EmptyDir, "a volume without a source is an emptyDir")
	assert.Nil(t, pod.Volumes[1].EmptyDir)
	assert.Empty(t, pod.Containers[0].TerminationMessagePath, "left unset so that old templates keep their hash")
}
