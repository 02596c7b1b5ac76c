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
		return
	}
	c.metrics.storeWritable.Set(1)
	c.health.set(storeCondition, nil)
}

// Backup writes a consistent copy of the store to w while the controller
// serves (api.Backuper).
func (c *Controller) Backup(ctx context.Context, w io.Writer, started func(size int64)) error {
	_, err := c.store.Backup(w, started)
	return err
}
