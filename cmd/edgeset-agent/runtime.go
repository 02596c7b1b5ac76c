package main

import (
	"context"
	"fmt"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/edgeagent/docker"
	"github.com/edgeset/edgeset/edgeagent/fake"
)

// newRuntime returns the named container runtime and its closer. The fake
// runtime simulates success: every pull succeeds (an image is "pulled" the
// first time it is asked for; imagePullPolicy Never still fails for an image
// never pulled, as on a real engine), every container starts and keeps
// running. The docker runtime fails here when the engine does not answer;
// the systemd unit restarts the agent until it does.
func newRuntime(ctx context.Context, name, dockerHost string) (edgeagent.Runtime, func(), error) {
	switch name {
	case "fake":
		return fake.New(), func() {}, nil
	case "docker":
		rt, err := docker.New(ctx, docker.Options{Host: dockerHost})
		if err != nil {
			return nil, nil, fmt.Errorf("runtime docker: %w", err)
		}
		return rt, func() { _ = rt.Close() }, nil
	}
	return nil, nil, fmt.Errorf("runtime: %q is not docker or fake", name)
}
