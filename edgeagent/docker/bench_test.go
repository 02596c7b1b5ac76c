package docker_test

import (
	"fmt"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/edgeset/edgeset/test/testimage"
)

// BenchmarkCreateStart measures the adapter's Create, Start and Remove of
// one container; compare with BenchmarkCreateStartDirect for its overhead
// over raw API calls.
func BenchmarkCreateStart(b *testing.B) {
	e := setup(b)
	ctx := b.Context()
	b.ResetTimer()
	for i := range b.N {
		id, err := e.rt.Create(ctx, e.spec(fmt.Sprint(i), "sleep"))
		if err != nil {
			b.Fatalf("Create: %v", err)
		}
		if err := e.rt.Start(ctx, id); err != nil {
			b.Fatalf("Start: %v", err)
		}
		if err := e.rt.Remove(ctx, id); err != nil {
			b.Fatalf("Remove: %v", err)
		}
	}
}

// BenchmarkCreateStartDirect does what BenchmarkCreateStart does with the
// same container configuration, through the moby client directly.
func BenchmarkCreateStartDirect(b *testing.B) {
	e := setup(b)
	ctx := b.Context()
	labels := testimage.ManagedLabels(e.node)
	b.ResetTimer()
	for i := range b.N {
		res, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name:       fmt.Sprintf("%s-%d", e.node, i),
			Config:     &container.Config{Image: e.image, Cmd: []string{"sleep"}, Labels: labels},
			HostConfig: &container.HostConfig{RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled}},
		})
		if err != nil {
			b.Fatalf("ContainerCreate: %v", err)
		}
		if _, err := e.cli.ContainerStart(ctx, res.ID, client.ContainerStartOptions{}); err != nil {
			b.Fatalf("ContainerStart: %v", err)
		}
		if _, err := e.cli.ContainerRemove(ctx, res.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			b.Fatalf("ContainerRemove: %v", err)
		}
	}
}
