package schema

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidateUpdateLock(t *testing.T) {
	tests := []struct {
		name string
		mut  func(ds *DaemonSet)
		want []string
	}{
		{"opted in", func(ds *DaemonSet) {
			ds.Spec.Template.Metadata.Annotations = map[string]string{UpdateLockAnnotation: "true"}
			ds.Spec.Rollout = &RolloutPolicy{UpdateLockStaleAfterSeconds: ptr(int32(600))}
		}, nil},
		{"opted in under apps/v1", func(ds *DaemonSet) {
			ds.APIVersion = APIVersionApps
			ds.Spec.Template.Metadata.Annotations = map[string]string{UpdateLockAnnotation: "true"}
		}, nil},
		{"never stale", func(ds *DaemonSet) { ds.Spec.Rollout = &RolloutPolicy{UpdateLockStaleAfterSeconds: ptr(int32(0))} }, nil},
		{"bad value", func(ds *DaemonSet) {
			ds.Spec.Template.Metadata.Annotations = map[string]string{UpdateLockAnnotation: "yes"}
		}, []string{`spec.template.metadata.annotations[edgeset.io/update-lock]: unsupported value "yes": want "true" (remove the annotation to opt out)`}},
		{"a volume where the lock goes", func(ds *DaemonSet) {
			ds.Spec.Template.Metadata.Annotations = map[string]string{UpdateLockAnnotation: "true"}
			ds.Spec.Template.Spec.Containers[0].VolumeMounts = append(ds.Spec.Template.Spec.Containers[0].VolumeMounts,
				VolumeMount{Name: "data", MountPath: "/run/edgeset/"}, VolumeMount{Name: "data", MountPath: "/run/edgeset/x"},
				VolumeMount{Name: "data", MountPath: "/run/edgesetx"})
		}, []string{
			"spec.template.spec.containers[0].volumeMounts[1].mountPath: /run/edgeset/ is where the update lock directory is mounted (annotation edgeset.io/update-lock)",
			"spec.template.spec.containers[0].volumeMounts[2].mountPath: /run/edgeset/x is where the update lock directory is mounted (annotation edgeset.io/update-lock)",
		}},
		{"the same volume without the lock", func(ds *DaemonSet) {
			ds.Spec.Template.Spec.Containers[0].VolumeMounts = append(ds.Spec.Template.Spec.Containers[0].VolumeMounts,
				VolumeMount{Name: "data", MountPath: "/run/edgeset"})
		}, nil},
		{"negative stale limit", func(ds *DaemonSet) { ds.Spec.Rollout = &RolloutPolicy{UpdateLockStaleAfterSeconds: ptr(int32(-1))} },
			[]string{"spec.rollout.updateLockStaleAfterSeconds: must be >= 0 (0: never stale), not -1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds := validDS()
			tc.mut(ds)
			err := ValidateDaemonSet(ds)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			assert.Equal(t, tc.want, problems(t, err))
		})
	}
}

func TestDecodeUpdateLockStaleAfter(t *testing.T) {
	objs, warnings, err := Decode("x.yaml", []byte(minimalDS("edgeset.io/v1", "  rollout:\n    updateLockStaleAfterSeconds: 900\n")))
	require.NoError(t, err)
	assert.Empty(t, warnings, "every field is known")
	assert.Equal(t, int32(900), *objs[0].DaemonSet.Spec.Rollout.UpdateLockStaleAfterSeconds)
	_, _, err = Decode("x.yaml", []byte(minimalDS("apps/v1", "  rollout:\n    updateLockStaleAfterSeconds: 900\n")))
	require.Error(t, err, "spec.rollout is edgeset's own")
}

func TestUpdateLockEnabledChangesTheRevision(t *testing.T) {
	tmpl := validDS().Spec.Template
	before := TemplateHash(tmpl)
	tmpl.Metadata.Annotations = map[string]string{UpdateLockAnnotation: "true"}
	assert.True(t, tmpl.UpdateLockEnabled())
	assert.NotEqual(t, before, TemplateHash(tmpl), "the lock mounts a directory: a new revision")
}

func TestLockInstantRoundTrip(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("CET", 3600))
	back, err := ParseLockInstant(FormatLockInstant(at))
	require.NoError(t, err)
	assert.True(t, at.Equal(back))
	assert.Equal(t, "2026-03-01T11:00:00.123456789Z", FormatLockInstant(at))
}
