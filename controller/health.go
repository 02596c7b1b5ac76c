package controller

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/edgeset/edgeset/controller/api"
)

// health is the set of faults that make the controller unready: a store
// that cannot persist, a dead MQTT listener. Each part reports its own
// condition under a fixed name; /readyz fails while any is set. health
// owns its lock and is safe for concurrent use.
type health struct {
	mu     sync.Mutex
	faults map[string]error // condition name -> why; guarded by mu
	probes map[string]func() error
}

// set records (err != nil) or clears (nil) the fault named condition.
func (h *health) set(condition string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		delete(h.faults, condition)
		return
	}
	if h.faults == nil {
		h.faults = make(map[string]error)
	}
	h.faults[condition] = err
}

// has reports whether the fault named condition is set.
func (h *health) has(condition string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.faults[condition]
	return ok
}

// probe registers fn, asked on every readiness check, under condition.
// Register probes before Run.
func (h *health) probe(condition string, fn func() error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.probes == nil {
		h.probes = make(map[string]func() error)
	}
	h.probes[condition] = fn
}

// err joins every current fault, sorted by condition, each as
// "condition: why"; nil when healthy. Probes run outside the lock.
func (h *health) err() error {
	h.mu.Lock()
	faults := make(map[string]error, len(h.faults)+len(h.probes))
	for name, err := range h.faults {
		faults[name] = err
	}
	probes := make(map[string]func() error, len(h.probes))
	for name, fn := range h.probes {
		probes[name] = fn
	}
	h.mu.Unlock()
	for name, fn := range probes {
		if err := fn(); err != nil {
			faults[name] = err
		}
	}
	if len(faults) == 0 {
		return nil
	}
	names := make([]string, 0, len(faults))
	for name := range faults {
		names = append(names, name)
	}
	slices.Sort(names)
	errs := make([]error, 0, len(names))
	for _, name := range names {
		errs = append(errs, fmt.Errorf("%s: %w", name, faults[name]))
	}
	return fmt.Errorf("%w: %w", api.ErrUnavailable, errors.Join(errs...))
}
