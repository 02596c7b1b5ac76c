package docker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/stretchr/testify/assert"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/schema"
)

// TestUpdateLockOnDocker: on the real engine, a daemon that opts into the
// update lock and creates the lock file (as nobody, in the directory the
// agent mounts at /run/edgeset) defers its update: its container keeps
// running, the new revision's is not created, and the lock is reported
// deferred. Once the daemon removes the file and the controller has
// answered (asked to keep the old revision), the next request updates.
func TestUpdateLockOnDocker(t *testing.T) {
	h := newAgentHarness(t)
	cfg := h.config()
	cfg.UpdateLockPoll = 100 * time.Millisecond
	h.start(cfg)
	h.connect()

	nobody := int64(65534)
	locked := func(version string) schema.Revision {
		tmpl := appTemplate(h.e.image, []string{"hold", schema.UpdateLockFile}, func(p *schema.PodSpec) {
			p.Containers[0].Env = []schema.EnvVar{{Name: "VERSION", Value: version}}
			p.SecurityContext = &schema.PodSecurityContext{RunAsUser: &nobody}
		})
		tmpl.Metadata.Annotations = map[string]string{schema.UpdateLockAnnotation: "true"}
		return revision("edge/flasher", 1, tmpl)
	}
	v1, v2 := locked("1"), locked("2")

	h.apply(1, v1)
	held := h.waitInstance(v1, func(st schema.InstanceStatus) error {
		if st.UpdateLock == nil || st.UpdateLock.Deferred {
			return fmt.Errorf("update lock %+v, want held by the daemon (%s, %s)", st.UpdateLock, st.Phase, st.Message)
		}
		return nil
	}).UpdateLock.HeldSince
	old := h.waitManaged(revisionsRunning(v1))[0].ID

	h.apply(2, v2)
	h.waitInstance(v1, func(st schema.InstanceStatus) error {
		if l := st.UpdateLock; l == nil || !l.Deferred || !l.HeldSince.Equal(held) {
			return fmt.Errorf("update lock %+v, want deferred, held since %s", st.UpdateLock, held)
		}
		return nil
	})
	h.waitInstance(v2, pendingWith("update deferred"))
	h.waitEvent("UpdateDeferred")
	h.waitPasses(2)
	h.waitManaged(revisionsRunning(v1)) // only v1, still running: not stopped, v2 not created

	execIn(t, h.e.cli, old, "/app", "rm", schema.UpdateLockFile) // the daemon is done
	h.waitPasses(3)
	h.waitManaged(revisionsRunning(v1)) // deferred: waits for the controller's answer

	h.apply(3, v1) // the answer: keep v1
	h.waitInstance(v1, func(st schema.InstanceStatus) error {
		if st.UpdateLock != nil {
			return fmt.Errorf("update lock %+v, want none", st.UpdateLock)
		}
		return nil
	})
	h.apply(4, v2)
	h.waitInstance(v2, func(st schema.InstanceStatus) error {
		if st.Phase != schema.PhaseRunning || st.UpdateLock == nil {
			return fmt.Errorf("phase %s (%s), lock %+v: want the new daemon running, holding its own lock", st.Phase, st.Message, st.UpdateLock)
		}
		return nil
	})
	list := h.waitManaged(revisionsRunning(v2))
	assert.NotEqual(t, old, list[0].ID)
}

// revisionsRunning waits for exactly one managed container per revision
// of revs, each running, and no other.
func revisionsRunning(revs ...schema.Revision) func([]container.Summary) error {
	return func(list []container.Summary) error {
		if len(list) != len(revs) {
			return fmt.Errorf("%d managed containers, want %d", len(list), len(revs))
		}
		for i, rev := range revs {
			c := list[i]
			if c.Labels[edgeagent.LabelRevision] != rev.Hash || c.State != container.StateRunning {
				return fmt.Errorf("container %s: revision %s %s, want %s running", c.ID, c.Labels[edgeagent.LabelRevision], c.State, rev.Hash)
			}
		}
		return nil
	}
}
