package controller

import (
	"context"
	"net"

	"github.com/edgeset/edgeset/mqttclient"
)

// countingTransport stands in for the broker in the in-process
// benchmarks: it delivers nothing (the benchmark hands the controller the
// fleet's messages itself) and passes every published message to
// published, so the figures are the controller's own, without the
// broker's retained store and fan-out.
type countingTransport struct {
	synced    chan struct{}
	published func(mqttclient.Message)
}

var _ transport = (*countingTransport)(nil)

// countingTransportOf returns the seam (Config.newTransport) that makes
// a countingTransport calling published.
func countingTransportOf(published func(mqttclient.Message)) func(transportHooks) (transport, error) {
	return func(transportHooks) (transport, error) {
		t := &countingTransport{synced: make(chan struct{}), published: published}
		close(t.synced)
		return t, nil
	}
}

func (t *countingTransport) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

func (t *countingTransport) Synced() <-chan struct{} { return t.synced }

func (t *countingTransport) Publish(_ context.Context, m mqttclient.Message) error {
	t.published(m)
	return nil
}

func (t *countingTransport) PublishAll(_ context.Context, msgs []mqttclient.Message) error {
	for _, m := range msgs {
		t.published(m)
	}
	return nil
}

func (t *countingTransport) Addr() net.Addr   { return nil }
func (t *countingTransport) Describe() string { return "benchmark (counting)" }
func (t *countingTransport) Pending() int     { return 0 }
func (t *countingTransport) Close() error     { return nil }
