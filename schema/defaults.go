package schema

import "strings"

// Defaults applied by SetDefaults, as in Kubernetes.
const (
	DefaultRevisionHistoryLimit          = 10
	DefaultTerminationGracePeriodSeconds = 30
	DefaultProbeTimeoutSeconds           = 1
	DefaultProbePeriodSeconds            = 10
	DefaultProbeSuccessThreshold         = 1
	DefaultProbeFailureThreshold         = 3
	ProtocolTCP                          = "TCP"
	ProtocolUDP                          = "UDP"
)

// SetDefaults fills every unset field that has a default, in one place, with
// the value Kubernetes would give it: namespace "default"; updateStrategy
// RollingUpdate with maxUnavailable 1 and maxSurge 0; revisionHistoryLimit
// 10; restartPolicy Always; terminationGracePeriodSeconds 30; a volume
// with no source an emptyDir; per init and main container imagePullPolicy
// Always for an image tagged :latest or not tagged at all and IfNotPresent
// otherwise, port protocol TCP, and (liveness, readiness and startup) probe
// timeoutSeconds 1, periodSeconds 10, successThreshold 1, failureThreshold
// 3. Fields already set are left alone, so SetDefaults is idempotent.
//
// Kubernetes' other container defaults (terminationMessagePath
// /dev/termination-log, terminationMessagePolicy File, fieldRef apiVersion
// v1) are left unset so that templates written before edgeset knew these
// fields keep their revision hash; an unset value means the default.
func SetDefaults(ds *DaemonSet) {
	if ds.Metadata.Namespace == "" {
		ds.Metadata.Namespace = DefaultNamespace
	}
	setStrategyDefaults(&ds.Spec.UpdateStrategy)
	if ds.Spec.RevisionHistoryLimit == nil {
		ds.Spec.RevisionHistoryLimit = ptr(int32(DefaultRevisionHistoryLimit))
	}
	setPodSpecDefaults(&ds.Spec.Template.Spec)
}

func setStrategyDefaults(s *DaemonSetUpdateStrategy) {
	if s.Type == "" {
		s.Type = RollingUpdateStrategy
	}
	if s.Type != RollingUpdateStrategy {
		return
	}
	if s.RollingUpdate == nil {
		s.RollingUpdate = &RollingUpdateDaemonSet{}
	}
	if s.RollingUpdate.MaxUnavailable == nil {
		s.RollingUpdate.MaxUnavailable = ptr(FromInt(1))
	}
	if s.RollingUpdate.MaxSurge == nil {
		s.RollingUpdate.MaxSurge = ptr(FromInt(0))
	}
}

func setPodSpecDefaults(p *PodSpec) {
	if p.RestartPolicy == "" {
		p.RestartPolicy = RestartPolicyAlways
	}
	if p.TerminationGracePeriodSeconds == nil {
		p.TerminationGracePeriodSeconds = ptr(int64(DefaultTerminationGracePeriodSeconds))
	}
	for i := range p.InitContainers {
		setContainerDefaults(&p.InitContainers[i])
	}
	for i := range p.Containers {
		setContainerDefaults(&p.Containers[i])
	}
	for i := range p.Volumes {
		if len(volumeSourceNames(&p.Volumes[i])) == 0 {
			p.Volumes[i].EmptyDir = &EmptyDirVolumeSource{}
		}
	}
}

func setContainerDefaults(c *Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = PullIfNotPresent
		if tag, digest := imageTag(c.Image); tag == "latest" || (tag == "" && digest == "") {
			c.ImagePullPolicy = PullAlways
		}
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = ProtocolTCP
		}
	}
	setProbeDefaults(c.LivenessProbe)
	setProbeDefaults(c.ReadinessProbe)
	setProbeDefaults(c.StartupProbe)
}

func setProbeDefaults(p *Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = DefaultProbeTimeoutSeconds
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = DefaultProbePeriodSeconds
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = DefaultProbeSuccessThreshold
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = DefaultProbeFailureThreshold
	}
}

// imageTag splits the tag and digest off an image reference:
// "registry:5000/app:1.2@sha256:ab" has tag "1.2" and digest "sha256:ab".
// A colon before the last slash belongs to the registry host, not a tag.
func imageTag(image string) (tag, digest string) {
	name, digest, _ := strings.Cut(image, "@")
	last := name[strings.LastIndex(name, "/")+1:]
	if i := strings.LastIndex(last, ":"); i >= 0 {
		tag = last[i+1:]
	}
	return tag, digest
}

func ptr[T any](v T) *T { return &v }
