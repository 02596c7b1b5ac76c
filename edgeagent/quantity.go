package edgeagent

import (
	"fmt"
	"math"

	"github.com/edgeset/edgeset/schema"
)

// parseNanoCPUs converts a CPU limit to Docker's NanoCPUs at Kubernetes'
// milli-CPU precision, rounding up ("100m" is 1e8, "0.5" is 5e8).
func parseNanoCPUs(q schema.Quantity) (int64, error) {
	milli, err := q.MilliValue()
	if err != nil {
		return 0, err
	}
	if milli < 0 || milli > math.MaxInt64/1_000_000 {
		return 0, fmt.Errorf("quantity %q: out of range", string(q))
	}
	return milli * 1_000_000, nil
}

// parseBytes converts a memory limit to bytes, rounding up.
func parseBytes(q schema.Quantity) (int64, error) {
	n, err := q.Value()
	if err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, fmt.Errorf("quantity %q: must not be negative", string(q))
	}
	return n, nil
}
