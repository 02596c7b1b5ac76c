package controller

import (
	"context"
	"io"

	"github.com/edgeset/edgeset/controller/api"
)

var _ api.Backuper = (*Controller)(nil)

// storeCondition is the health condition of a store that cannot persist.
const storeCondition = "store"

// storeWritten hears the outcome of every store commit (store.Options.
// OnWrite): a refused write makes the controller unready and is counted,
// and the next write that commits clears the fault. The controller keeps
// serving reads meanwhile; every change is refused with the store's error.
func (c *Controller) storeWritten(err error) {
	if err != nil {
		c.metrics.storeWriteErrors.Inc()
		c.metrics.storeWritable.Set(0)
		c.health.set(storeCondition, err)
		if c.cfg.OnStoreFault != nil {
			c.cfg.OnStoreFault(err)
		}
		return
	}
	c.metrics.storeWritable.Set(1)
	c.health.set(storeCondition, nil)
}

// storeProbeFree is the free space the store's file system must have
// before retryStoreFault tries its write: the file's own free pages take a
// small write even on a full disk, which would report a disk that refused
// the last real write as writable again.
const storeProbeFree = 4 << 20

// retryStoreFault, while the store fault is set and the file system has
// storeProbeFree bytes free (or cannot tell), tries a write that leaves
// nothing behind (store.Probe), so that readiness comes back once the disk
// has room again even if nothing else writes: the failed write may have
// been an API request, which nothing retries, and a quiet fleet writes
// nothing. Run once a second by flushNodesLoop.
func (c *Controller) retryStoreFault() {
	if !c.health.has(storeCondition) {
		return
	}
	if free, ok := c.store.Available(); ok && free < storeProbeFree {
		return
	}
	_ = c.store.Probe() // the outcome reaches storeWritten
}

// Backup writes a consistent copy of the store to w while the controller
// serves (api.Backuper).
func (c *Controller) Backup(ctx context.Context, w io.Writer, started func(size int64)) error {
	_, err := c.store.Backup(w, started)
	return err
}
