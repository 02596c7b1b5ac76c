package controller

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeset/edgeset/controller/registry"
	"github.com/edgeset/edgeset/schema"
)

// Bounds on the fleet series' cardinality: sites past maxMetricSites are
// counted under otherSite, and per-node series (metrics-per-node) cover
// the first MaxPerNodeSeriesNodes nodes by name.
const (
	maxMetricSites        = 256
	otherSite             = "_other"
	MaxPerNodeSeriesNodes = 1000
)

// Rollout phases of edgeset_daemonset_rollout_phase, one of which is 1.
const (
	rolloutProgressing   = "progressing"
	rolloutComplete      = "complete"
	rolloutPaused        = "paused"
	rolloutCanaryWaiting = "canary_waiting"
	rolloutRollingBack   = "rolling_back"
)

var rolloutPhases = []string{rolloutProgressing, rolloutComplete, rolloutPaused, rolloutCanaryWaiting, rolloutRollingBack}

// fleetCollector reports the fleet's gauges when scraped, from the working
// state and the registry: a reconcile pass costs nothing for them, and a
// scrape walks the nodes once without copying them. Its series are bounded
// by the number of daemonsets, condition types and sites (maxMetricSites),
// never by the fleet's size, unless per-node series are asked for.
type fleetCollector struct {
	c *Controller

	nodes, daemonsets, instances   *prometheus.Desc
	byCondition, bySite            *prometheus.Desc
	dsCounts                       []dsCountDesc
	rolloutNodes, rolloutPhase     *prometheus.Desc
	rolloutPaused, rolloutRollback *prometheus.Desc
	lastProgress, deadline         *prometheus.Desc
	nodeOnline, nodeCondition      *prometheus.Desc
	nodeTruncated                  *prometheus.Desc

	progress *progressClock
}

// dsCountDesc is one per-daemonset count and how to read it off a view.
type dsCountDesc struct {
	desc *prometheus.Desc
	get  func(st *dsStatus) int
}

// dsLabels are the labels of every per-daemonset series.
var dsLabels = []string{"namespace", "daemonset"}

func newFleetCollector(c *Controller) *fleetCollector {
	ds := func(name, help string, extra ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, append(slices.Clone(dsLabels), extra...), nil)
	}
	count := func(name, help string, get func(st *dsStatus) int) dsCountDesc {
		return dsCountDesc{desc: ds("edgeset_daemonset_status_"+name, help), get: get}
	}
	return &fleetCollector{c: c,
		nodes:      prometheus.NewDesc("edgeset_nodes", "Known nodes by presence.", []string{"state"}, nil),
		daemonsets: prometheus.NewDesc("edgeset_daemonsets", "Declared daemonsets.", nil, nil),
		instances:  prometheus.NewDesc("edgeset_instances", "Instances reported by agents, by phase.", []string{"phase"}, nil),
		byCondition: prometheus.NewDesc("edgeset_nodes_by_condition",
			"Registered nodes by condition type and status (True, False, Unknown).", []string{"condition", "status"}, nil),
		bySite: prometheus.NewDesc("edgeset_nodes_by_site",
			"Registered nodes by the value of their site label (site-label; \"\" without it, \"_other\" past 256 sites) and state: ready, not_ready (online, Ready not True), offline.",
			[]string{"site", "state"}, nil),
		dsCounts: []dsCountDesc{
			count("desired_number_scheduled", "Nodes that should run the daemonset.", func(st *dsStatus) int { return st.DesiredNumberScheduled }),
			count("current_number_scheduled", "Nodes that run it.", func(st *dsStatus) int { return st.CurrentNumberScheduled }),
			count("number_misscheduled", "Nodes that run it but should not.", func(st *dsStatus) int { return st.NumberMisscheduled }),
			count("number_ready", "Nodes that should run it and report it ready.", func(st *dsStatus) int { return st.NumberReady }),
			count("number_available", "Ready nodes whose instance has been ready for minReadySeconds.", func(st *dsStatus) int { return st.NumberAvailable }),
			count("number_unavailable", "Nodes that should run it and have no available instance.", func(st *dsStatus) int { return st.NumberUnavailable }),
			count("updated_number_scheduled", "Nodes that run its current revision.", func(st *dsStatus) int { return st.UpdatedNumberScheduled }),
			count("nodes_offline", "Nodes that should run it and are offline.", func(st *dsStatus) int { return st.NodesOffline }),
		},
		rolloutNodes: ds("edgeset_daemonset_rollout_nodes",
			"Nodes of the daemonset's rollout by phase: updated, updating, waiting, waiting_for_window (its maintenance windows closed), waiting_for_prefetch (its download of the new revision's images not done), offline, failed (its target instance failed).", "phase"),
		rolloutPhase: ds("edgeset_daemonset_rollout_phase",
			"1 for the rollout's phase: progressing, complete, paused, canary_waiting or rolling_back (an automatic rollback under way).", "phase"),
		rolloutPaused: ds("edgeset_daemonset_rollout_paused", "1 while the rollout is paused, by the operator or by its failure threshold."),
		rolloutRollback: ds("edgeset_daemonset_rollout_rolled_back",
			"1 once the rollout rolled back automatically (until the next revision)."),
		lastProgress: ds("edgeset_daemonset_rollout_last_progress_timestamp_seconds",
			"When the rollout's updated or available count, or its target, last changed (or the controller started), in Unix seconds."),
		deadline: ds("edgeset_daemonset_rollout_progress_deadline_seconds",
			"The daemonset's progressDeadlineSeconds, when it sets one."),
		nodeOnline: prometheus.NewDesc("edgeset_node_online", "1 while the node is online (metrics-per-node).", []string{"node"}, nil),
		nodeCondition: prometheus.NewDesc("edgeset_node_condition",
			"1 for the status of each of the node's conditions (metrics-per-node).", []string{"node", "condition", "status"}, nil),
		nodeTruncated: prometheus.NewDesc("edgeset_node_series_truncated",
			"1 when metrics-per-node covers only the first 1000 nodes by name.", nil, nil),
		progress: newProgressClock(),
	}
}

func (f *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{f.nodes, f.daemonsets, f.instances, f.byCondition, f.bySite,
		f.rolloutNodes, f.rolloutPhase, f.rolloutPaused, f.rolloutRollback, f.lastProgress, f.deadline} {
		ch <- d
	}
	for _, d := range f.dsCounts {
		ch <- d.desc
	}
	if f.c.cfg.MetricsPerNode {
		ch <- f.nodeOnline
		ch <- f.nodeCondition
		ch <- f.nodeTruncated
	}
}

func (f *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	online, known := f.c.registry.Counts()
	gauge(f.nodes, float64(online), "online")
	gauge(f.nodes, float64(known-online), "offline")
	gauge(f.daemonsets, float64(f.c.state.statusCount()))
	for phase, n := range f.c.state.observedPhases() {
		gauge(f.instances, float64(n), phase)
	}
	t := f.tallyNodes()
	for k, n := range t.conditions {
		gauge(f.byCondition, float64(n), k.condition, k.status)
	}
	for k, n := range t.sites {
		gauge(f.bySite, float64(n), k.site, k.state)
	}
	f.collectDaemonSets(gauge)
	if f.c.cfg.MetricsPerNode {
		f.collectNodes(gauge, t.names)
	}
}

// gaugeFunc sends one gauge sample.
type gaugeFunc func(d *prometheus.Desc, v float64, labels ...string)

func (f *fleetCollector) collectDaemonSets(gauge gaugeFunc) {
	now := f.c.now()
	views := f.c.state.views()
	keep := make(map[string]bool, len(views))
	for i := range views {
		v := &views[i]
		if v.entry.orphan() {
			continue
		}
		ds := v.entry.rec.DaemonSet
		key := v.entry.rec.Key()
		keep[key] = true
		labels := []string{ds.Metadata.Namespace, ds.Metadata.Name}
		for _, d := range f.dsCounts {
			gauge(d.desc, float64(d.get(&v.status)), labels...)
		}
		ro := v.status.Rollout
		for phase, n := range map[string]int{"updated": ro.Updated, "updating": ro.Updating, "waiting": ro.Waiting, "waiting_for_window": ro.WaitingForWindow,
			"held_by_lock": ro.HeldByLock, "waiting_for_prefetch": ro.WaitingForPrefetch, "offline": ro.Offline, "failed": ro.Failed} {
			gauge(f.rolloutNodes, float64(n), append(labels, phase)...)
		}
		paused := ro.Paused || v.entry.rollout.OperatorPaused
		current := rolloutPhaseOf(ro.Complete, paused, ro.CanaryWaiting, ro.RolledBack)
		for _, phase := range rolloutPhases {
			gauge(f.rolloutPhase, boolGauge(phase == current), append(labels, phase)...)
		}
		gauge(f.rolloutPaused, boolGauge(paused), labels...)
		gauge(f.rolloutRollback, boolGauge(ro.RolledBack), labels...)
		at := f.progress.observe(key, progressMark{target: ro.Target, updated: ro.Updated, available: v.status.NumberAvailable}, now)
		gauge(f.lastProgress, float64(at.UnixNano())/1e9, labels...)
		if d := v.entry.strategy.ProgressDeadline; d > 0 {
			gauge(f.deadline, d.Seconds(), labels...)
		}
	}
	f.progress.retain(keep)
}

// rolloutPhaseOf names a rollout's phase, one of rolloutPhases.
func rolloutPhaseOf(complete, paused, canaryWaiting, rolledBack bool) string {
	switch {
	case paused:
		return rolloutPaused
	case canaryWaiting:
		return rolloutCanaryWaiting
	case complete:
		return rolloutComplete
	case rolledBack:
		return rolloutRollingBack
	default:
		return rolloutProgressing
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// nodeTally is one walk of the registry: nodes by condition and by site,
// and, with per-node series, what they report of each node.
type nodeTally struct {
	conditions map[conditionKey]int
	sites      map[siteKey]int
	names      []nodeSeries
}

type conditionKey struct{ condition, status string }

type siteKey struct{ site, state string }

// nodeSeries is what per-node series say of one node.
type nodeSeries struct {
	name       string
	online     bool
	conditions []schema.NodeCondition
}

// Node states of edgeset_nodes_by_site.
const (
	siteReady    = "ready"
	siteNotReady = "not_ready"
	siteOffline  = "offline"
)

func (f *fleetCollector) tallyNodes() nodeTally {
	t := nodeTally{conditions: map[conditionKey]int{}, sites: map[siteKey]int{}}
	sites := map[string]bool{}
	label, perNode := f.c.cfg.SiteLabel, f.c.cfg.MetricsPerNode
	f.c.registry.Each(f.c.now(), f.c.cfg.NodeOfflineGrace, func(n *schema.Node, st registry.NodeState) {
		ready := false
		for _, cond := range n.Conditions {
			t.conditions[conditionKey{cond.Type, cond.Status}]++
			ready = ready || cond.Type == schema.NodeReady && cond.Status == schema.ConditionTrue
		}
		site := n.Labels[label]
		if !sites[site] {
			if len(sites) >= maxMetricSites {
				site = otherSite
			} else {
				sites[site] = true
			}
		}
		state := siteOffline
		switch {
		case st.Online && ready:
			state = siteReady
		case st.Online:
			state = siteNotReady
		}
		t.sites[siteKey{site, state}]++
		if perNode {
			t.names = append(t.names, nodeSeries{name: n.Name, online: st.Online, conditions: n.Conditions})
		}
	})
	return t
}

// collectNodes sends the per-node series of the first
// MaxPerNodeSeriesNodes nodes by name.
func (f *fleetCollector) collectNodes(gauge gaugeFunc, nodes []nodeSeries) {
	slices.SortFunc(nodes, func(a, b nodeSeries) int { return strings.Compare(a.name, b.name) })
	gauge(f.nodeTruncated, boolGauge(len(nodes) > MaxPerNodeSeriesNodes))
	for _, n := range nodes[:min(len(nodes), MaxPerNodeSeriesNodes)] {
		gauge(f.nodeOnline, boolGauge(n.online), n.name)
		for _, cond := range n.conditions {
			gauge(f.nodeCondition, 1, n.name, cond.Type, cond.Status)
		}
	}
}

// progressClock remembers, per daemonset, when its rollout last made
// progress: one entry per daemonset, dropped with it.
type progressClock struct {
	mu   sync.Mutex // guards seen
	seen map[string]progressSeen
}

// progressMark is what counts as progress when it changes.
type progressMark struct {
	target             string
	updated, available int
}

type progressSeen struct {
	mark progressMark
	at   time.Time
}

func newProgressClock() *progressClock { return &progressClock{seen: map[string]progressSeen{}} }

// observe records daemonset key's mark at now and returns when it last
// changed (now, the first time the key is seen).
func (p *progressClock) observe(key string, m progressMark, now time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.seen[key]
	if !ok || s.mark != m {
		s = progressSeen{mark: m, at: now}
		p.seen[key] = s
	}
	return s.at
}

// retain forgets the daemonsets not in keep.
func (p *progressClock) retain(keep map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key := range p.seen {
		if !keep[key] {
			delete(p.seen, key)
		}
	}
}
