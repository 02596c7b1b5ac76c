package ha

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/edgeset/edgeset/controller/replica"
)

// TestBehindGuard: the term ends on a commit of unknown outcome, and on a
// local write fault that follows a commit etcd took; not on a fault of a
// write etcd refused (the store rolled it back: the file is not behind).
func TestBehindGuard(t *testing.T) {
	disk := errors.New("no space left on device")
	tests := []struct {
		name    string
		commit  error // Replicate's outcome; nil: etcd took it
		fault   error // the local outcome reported after; nil: none
		aborted bool
	}{
		{name: "committed", commit: nil, fault: nil},
		{name: "local fault after etcd took it", commit: nil, fault: disk, aborted: true},
		{name: "etcd refused", commit: errors.New("not the leader"), fault: errors.New("not the leader")},
		{name: "unknown outcome", commit: fmt.Errorf("commit: %w", replica.ErrDiverged), fault: nil, aborted: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cause error
			g := &behindGuard{abort: func(err error) { cause = err }}
			assert.Equal(t, tc.commit, g.committed(tc.commit))
			if tc.fault != nil {
				g.fault(tc.fault)
			}
			assert.Equal(t, tc.aborted, cause != nil, "cause %v", cause)
		})
	}
	var causes int
	g := &behindGuard{abort: func(error) { causes++ }}
	_ = g.committed(nil)
	g.fault(disk)
	g.fault(disk) // the store's next writes fail with ErrBehind before Replicate
	assert.Equal(t, 1, causes, "one abort per write etcd took")
}
