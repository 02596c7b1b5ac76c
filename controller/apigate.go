package controller

import (
	"context"
	"net/http"
	"sync"

	"github.com/edgeset/edgeset/controller/api"
)

// apiGate is the controller's API handler as Handler hands it out with
// Config.ExternalAPI: it admits requests only while Run runs, ties each
// request's context to Run's, and lets Run wait for those it admitted
// before the store closes, as api.Server.Serve's shutdown does for a
// listener of the controller's own.
type apiGate struct {
	handler *api.Server // set by open, then read only

	mu       sync.Mutex // guards the fields below
	ctx      context.Context
	open     bool           // Run runs and its context has not ended
	inFlight sync.WaitGroup // requests admitted
}

// ServeHTTP serves r with the API while the gate is open, else 503.
func (g *apiGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, ok := g.admit()
	if !ok {
		w.Header().Set("Retry-After", "1")
		http.Error(w, "controller is not running", http.StatusServiceUnavailable)
		return
	}
	defer g.inFlight.Done()
	rctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	g.handler.ServeHTTP(w, r.WithContext(rctx))
}

func (g *apiGate) admit() (context.Context, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.open {
		return nil, false
	}
	g.inFlight.Add(1)
	return g.ctx, true
}

// run opens the gate until ctx ends, then closes it and returns once
// every admitted request has returned.
func (g *apiGate) run(ctx context.Context) error {
	g.mu.Lock()
	g.ctx, g.open = ctx, true
	g.mu.Unlock()
	<-ctx.Done()
	g.mu.Lock()
	g.open = false
	g.mu.Unlock()
	g.inFlight.Wait()
	return nil
}
