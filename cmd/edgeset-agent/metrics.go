package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/edgeset/edgeset/edgeagent"
	"github.com/edgeset/edgeset/schema"
)

// Limits of the metrics server: what one client (a scraper, or anything
// that can reach metrics-addr) can hold of it. A scrape is a GET with no
// body and a small answer; collecting takes at most the runtime's 3 s
// Info timeout.
const (
	// metricsReadHeaderTimeout closes a connection that has not sent its
	// request headers by then.
	metricsReadHeaderTimeout = 5 * time.Second
	// metricsReadTimeout bounds reading a whole request, body included: a
	// body sent a byte at a time would otherwise hold the connection for
	// ever (net/http reads what a handler left of it before reusing the
	// connection).
	metricsReadTimeout = 10 * time.Second
	// metricsWriteTimeout bounds serving a request from the end of its
	// headers, collecting and writing the answer.
	metricsWriteTimeout = 30 * time.Second
	// metricsIdleTimeout closes an idle keep-alive connection.
	metricsIdleTimeout = 60 * time.Second
	// metricsMaxHeaderBytes bounds a request's header block (431 past it).
	metricsMaxHeaderBytes = 64 << 10
)

// metricsServer serves /healthz and /metrics.
type metricsServer struct {
	srv  *http.Server
	done chan struct{}
}

// startMetrics listens on addr at once (so a bad address fails the start)
// and serves in the background until close.
func startMetrics(addr string, node *edgeagent.Node, rt edgeagent.Runtime, log *slog.Logger) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics-addr: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&agentCollector{node: node, rt: rt})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", healthz(node))
	m := &metricsServer{srv: newMetricsHTTPServer(mux), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	log.Info("metrics", "addr", ln.Addr().String())
	return m, nil
}

// newMetricsHTTPServer returns the http.Server of the metrics server, within
// its limits.
func newMetricsHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: metricsReadHeaderTimeout,
		ReadTimeout:       metricsReadTimeout,
		WriteTimeout:      metricsWriteTimeout,
		IdleTimeout:       metricsIdleTimeout,
		MaxHeaderBytes:    metricsMaxHeaderBytes,
	}
}

// healthz answers 200 while the process runs: a device without its broker
// keeps running its daemons and is healthy. The body tells whether the
// broker is connected.
func healthz(node *edgeagent.Node) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		state := "broker disconnected"
		if node.Client().Connected() {
			state = "broker connected"
		}
		fmt.Fprintf(w, "ok: %s\n", state)
	}
}

func (m *metricsServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
	<-m.done
}

var (
	descRuntimeUp = prometheus.NewDesc("edgeset_agent_runtime_up",
		"1 when the container runtime answers, else 0.", []string{"runtime", "version"}, nil)
	descConnected = prometheus.NewDesc("edgeset_agent_mqtt_connected",
		"1 while connected to the broker.", nil, nil)
	descMQTT = prometheus.NewDesc("edgeset_agent_mqtt_total",
		"MQTT client counters by kind: received, published, publish_errors, connects, reconnects, connect_failures, dropped, coalesced.",
		[]string{"kind"}, nil)
	descDroppedEvents = prometheus.NewDesc("edgeset_agent_events_dropped_total",
		"Node events not published (disconnected or publish failed).", nil, nil)
	descRefused = prometheus.NewDesc("edgeset_agent_signed_documents_refused_total",
		"Signed documents refused (trust-root set), by reason: the reasons of the node events reported.", []string{"reason"}, nil)
	descKeySet = prometheus.NewDesc("edgeset_agent_key_set_version",
		"Version of the accepted key set (0: none, or no trust-root).", nil, nil)
	descInstances = prometheus.NewDesc("edgeset_agent_instances",
		"Daemon instances by phase, as last reconciled.", []string{"phase"}, nil)
	descReady = prometheus.NewDesc("edgeset_agent_instances_ready",
		"Daemon instances that are ready.", nil, nil)
	descGeneration = prometheus.NewDesc("edgeset_agent_observed_generation",
		"Generation of the desired state the agent last reconciled.", nil, nil)
	descRestarts = prometheus.NewDesc("edgeset_agent_container_restarts",
		"Restarts summed over the current instances.", nil, nil)
)

// agentCollector reads the runtime, MQTT and reconcile figures at scrape time.
type agentCollector struct {
	node *edgeagent.Node
	rt   edgeagent.Runtime
}

func (c *agentCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRuntimeUp, descConnected, descMQTT, descDroppedEvents, descRefused, descKeySet, descInstances, descReady, descGeneration, descRestarts} {
		ch <- d
	}
}

func (c *agentCollector) Collect(ch chan<- prometheus.Metric) {
	c.collectRuntime(ch)
	st := c.node.Client().Stats()
	ch <- prometheus.MustNewConstMetric(descConnected, prometheus.GaugeValue, boolValue(st.Connected))
	for kind, v := range map[string]uint64{
		"received": st.Received, "published": st.Published, "publish_errors": st.PublishErrors,
		"connects": st.Connects, "reconnects": st.Reconnects, "connect_failures": st.ConnectFailures,
		"dropped": st.Dropped, "coalesced": st.Coalesced,
	} {
		ch <- prometheus.MustNewConstMetric(descMQTT, prometheus.CounterValue, float64(v), kind)
	}
	ch <- prometheus.MustNewConstMetric(descDroppedEvents, prometheus.CounterValue, float64(c.node.Agent().DroppedEvents()))
	for reason, n := range c.node.Agent().Refusals() {
		ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(n), reason)
	}
	ch <- prometheus.MustNewConstMetric(descKeySet, prometheus.GaugeValue, float64(c.node.Agent().KeySetVersion()))
	c.collectObserved(ch)
}

func (c *agentCollector) collectRuntime(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	info, err := c.rt.Info(ctx)
	ch <- prometheus.MustNewConstMetric(descRuntimeUp, prometheus.GaugeValue, boolValue(err == nil), info.Name, info.Version)
}

func (c *agentCollector) collectObserved(ch chan<- prometheus.Metric) {
	obs, _ := c.node.Agent().Observed()
	phases := map[string]int{}
	ready, restarts := 0, int64(0)
	for _, in := range obs.Instances {
		phases[in.Phase]++
		if in.Ready {
			ready++
		}
		restarts += int64(in.Restarts)
	}
	for _, p := range []string{schema.PhasePending, schema.PhasePulling, schema.PhaseRunning, schema.PhaseCrashLoopBackOff,
		schema.PhaseImagePullBackOff, schema.PhaseErrImagePull, schema.PhaseFailed, schema.PhaseRefused, schema.PhaseTerminating,
		schema.PhaseInitializing, schema.PhaseInitError, schema.PhaseInitCrashLoopBackOff, schema.PhaseCreateContainerConfigError} {
		ch <- prometheus.MustNewConstMetric(descInstances, prometheus.GaugeValue, float64(phases[p]), p)
	}
	ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, float64(ready))
	ch <- prometheus.MustNewConstMetric(descGeneration, prometheus.GaugeValue, float64(obs.ObservedGeneration))
	ch <- prometheus.MustNewConstMetric(descRestarts, prometheus.GaugeValue, float64(restarts))
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
