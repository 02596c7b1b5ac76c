package broker

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the broker's Prometheus metrics. The broker owns them; the
// controller registers them in its registry with Broker.Register.
type metrics struct {
	acceptErrors   *prometheus.CounterVec // by listener
	refused        *prometheus.CounterVec // by reason
	connectTimeout prometheus.Counter
	authFailures   *prometheus.CounterVec // by reason
	pending        prometheus.GaugeFunc
}

func newMetrics(pending func() float64) *metrics {
	return &metrics{
		acceptErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeset_broker_accept_errors_total",
			Help: "Errors accepting MQTT connections (EMFILE when file descriptors run out), by listener; the listener backs off and keeps accepting.",
		}, []string{"listener"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeset_broker_connections_refused_total",
			Help: "MQTT connections closed at accept, by reason: pending_limit, source_limit, auth_backoff.",
		}, []string{"reason"}),
		connectTimeout: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeset_broker_connect_timeouts_total",
			Help: "MQTT connections closed because CONNECT and authentication did not complete within the connect timeout.",
		}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeset_broker_auth_failures_total",
			Help: "Failed MQTT logins, by reason.",
		}, []string{"reason"}),
		pending: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edgeset_broker_pending_connections",
			Help: "MQTT connections accepted that have not yet completed CONNECT and authentication.",
		}, pending),
	}
}

// collectors lists every metric.
func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.acceptErrors, m.refused, m.connectTimeout, m.authFailures, m.pending}
}

// Register registers the broker's metrics (accept errors, refused
// connections, connect timeouts, failed logins, pending connections) in
// reg.
func (b *Broker) Register(reg prometheus.Registerer) error {
	var errs []error
	for _, c := range b.metrics.collectors() {
		errs = append(errs, reg.Register(c))
	}
	return errors.Join(errs...)
}
