package controller

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/edgeset/edgeset/controller/api"
)

// metrics are the controller's Prometheus metrics, on its own registry.
type metrics struct {
	reg *prometheus.Registry

	passDuration     prometheus.Histogram
	passChanged      prometheus.Histogram
	passPlaced       prometheus.Histogram
	fullPasses       prometheus.Counter
	storeWrite       prometheus.Histogram
	messagesIn       prometheus.Counter
	messagesRejected prometheus.Counter
	messagesOut      prometheus.Counter
	bytesOut         prometheus.Counter
	publishErrors    prometheus.Counter
	republishes      prometheus.Counter
	desiredRepairs   prometheus.Counter
	desiredLagging   prometheus.Gauge
	brokerDrops      prometheus.Counter
	resyncs          prometheus.Counter
	desiredTooLarge  prometheus.Counter

	// Store writability (storeWritten).
	storeWriteErrors prometheus.Counter
	storeWritable    prometheus.Gauge
	// Inbound limits (issue 13, points 14 and 15).
	eventsDropped    *prometheus.CounterVec
	eventsFolded     prometheus.Counter
	observedRejected *prometheus.CounterVec

	// The API's refusals (apiObserver).
	apiAuthFailures  prometheus.Counter
	apiAuthThrottled prometheus.Counter
	apiConnsRefused  *prometheus.CounterVec
	apiAcceptErrors  prometheus.Counter
}

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	f := factory{m.reg}
	m.passDuration = f.histogram("edgeset_reconcile_duration_seconds", "Duration of a reconcile pass (decide, store, publish).",
		prometheus.ExponentialBuckets(0.001, 2, 14))
	m.passChanged = f.histogram("edgeset_reconcile_changed_nodes", "Nodes whose desired state changed in a pass.",
		prometheus.ExponentialBuckets(1, 4, 9))
	m.passPlaced = f.histogram("edgeset_reconcile_placed_nodes",
		"Nodes a pass placed and assembled: those an event touched, or every node in a full pass.",
		prometheus.ExponentialBuckets(1, 4, 10))
	m.fullPasses = f.counter("edgeset_reconcile_full_passes_total",
		"Reconcile passes that decided every node and daemonset from scratch (start, full-pass-interval, after a failed store write).")
	m.storeWrite = f.histogram("edgeset_store_write_duration_seconds", "Duration of durable store writes of a pass.",
		prometheus.ExponentialBuckets(0.0005, 2, 14))
	m.messagesIn = f.counter("edgeset_mqtt_messages_in_total", "MQTT messages received from the fleet.")
	m.messagesRejected = f.counter("edgeset_mqtt_messages_rejected_total", "Malformed MQTT messages dropped.")
	m.messagesOut = f.counter("edgeset_mqtt_messages_out_total", "MQTT messages published.")
	m.bytesOut = f.counter("edgeset_mqtt_bytes_out_total", "MQTT payload bytes published.")
	m.publishErrors = f.counter("edgeset_mqtt_publish_errors_total", "Failed publishes (repeated on reconnection).")
	m.republishes = f.counter("edgeset_republish_total", "Full republishes of the fleet's desired state.")
	m.desiredRepairs = f.counter("edgeset_desired_repairs_total", "Desired states published again to online nodes that kept reporting an older generation (desired-repair-after).")
	m.desiredLagging = f.gauge("edgeset_desired_lagging_nodes",
		"Online nodes whose last report (or none yet) is of an older generation than their desired state's, as of the repair loop's last round (desired-repair-after).")
	m.brokerDrops = f.counter("edgeset_broker_dropped_total",
		"Messages the broker could not deliver: the embedded broker's own count, or the rise of an external broker's drop counter (broker-drop-topic).")
	m.desiredTooLarge = f.counter("edgeset_desired_too_large_total",
		"Desired states not published because they do not fit in one message (event DesiredStateTooLarge on the node).")
	m.resyncs = f.counter("edgeset_broker_resyncs_total", "Re-reads of every known node's retained state from an external broker.")
	m.storeWriteErrors = f.counter("edgeset_store_write_errors_total",
		"Store transactions the disk refused (full, I/O error): nothing of them was kept.")
	m.storeWritable = f.gauge("edgeset_store_writable", "1 while the last store write committed, 0 after one failed.")
	m.storeWritable.Set(1)
	m.eventsDropped = f.counterVec("edgeset_events_dropped_total",
		"Events not stored, by reason: rate_limited (a node over its event rate), node_cap (a node's oldest stored event evicted by its newest), queue_full, store_error.", "reason")
	for _, reason := range []string{dropRateLimited, dropNodeCap, dropQueueFull, dropStoreError} {
		m.eventsDropped.WithLabelValues(reason)
	}
	m.eventsFolded = f.counter("edgeset_events_folded_total", "Repeated events folded into an event series (count and lastTime of one stored event).")
	m.observedRejected = f.counterVec("edgeset_mqtt_observed_rejected_total",
		"Observed states refused, by reason: generation_ahead (above the desired generation issued to the node).", "reason")
	m.observedRejected.WithLabelValues("generation_ahead")
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.addAPIMetrics(f)
	return m
}

// addAPIMetrics registers the counters of the API's refusals.
func (m *metrics) addAPIMetrics(f factory) {
	m.apiAuthFailures = f.counter("edgeset_api_auth_failures_total", "API requests with no or a wrong bearer token.")
	m.apiAuthThrottled = f.counter("edgeset_api_auth_throttled_total",
		"API requests answered 429 because their source failed to authenticate too often (api-auth-failure-limit).")
	m.apiConnsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "edgeset_api_connections_refused_total",
		Help: "API connections closed at accept: reason unauthenticated (api-max-unauthenticated-connections) or per-source (api-max-connections-per-source).",
	}, []string{"reason"})
	f.reg.MustRegister(m.apiConnsRefused)
	for _, reason := range []string{api.ConnRefusedUnauthenticated, api.ConnRefusedPerSource} {
		m.apiConnsRefused.WithLabelValues(reason)
	}
	m.apiAcceptErrors = f.counter("edgeset_api_accept_errors_total",
		"Failed accepts of the API listener (out of file descriptors); the server retries with a back-off.")
}

// apiObserver counts the API's refusals in the controller's metrics.
type apiObserver struct{ m *metrics }

var _ api.Observer = apiObserver{}

func (o apiObserver) AuthFailed()               { o.m.apiAuthFailures.Inc() }
func (o apiObserver) AuthThrottled()            { o.m.apiAuthThrottled.Inc() }
func (o apiObserver) ConnRefused(reason string) { o.m.apiConnsRefused.WithLabelValues(reason).Inc() }
func (o apiObserver) AcceptFailed()             { o.m.apiAcceptErrors.Inc() }

// addQueueGauges exposes the controller's queues: a pending reconcile pass
// (wake-ups coalesce into at most one) and, with an external broker, the
// messages waiting in the client's coalescing inbox.
func (m *metrics) addQueueGauges(c *Controller) {
	m.reg.MustRegister(newFleetCollector(c))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "edgeset_reconcile_pending", Help: "1 while a reconcile pass is requested and not yet started.",
	}, func() float64 { return float64(len(c.kick)) }))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "edgeset_mqtt_inbox_pending", Help: "Messages from an external broker waiting to be handled (0 with the embedded broker).",
	}, func() float64 { return float64(c.transport.Pending()) }))
}

// handler serves the metrics in the Prometheus text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// observePass records one reconcile pass: its duration, the nodes whose
// desired state changed, the nodes it placed, and whether it was full.
func (m *metrics) observePass(d time.Duration, changed, placed int, full bool) {
	m.passDuration.Observe(d.Seconds())
	m.passChanged.Observe(float64(changed))
	m.passPlaced.Observe(float64(placed))
	if full {
		m.fullPasses.Inc()
	}
}

// factory registers metrics as it makes them.
type factory struct{ reg *prometheus.Registry }

func (f factory) counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	f.reg.MustRegister(c)
	return c
}

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

func (f factory) histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
	f.reg.MustRegister(h)
	return h
}
