package ui

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// liveEventBacklog bounds the events the live feed keeps for streams.
const liveEventBacklog = 200

// fleetSummary is what the Fleet page shows and the live stream pushes.
type fleetSummary struct {
	Nodes       int             `json:"nodes"`
	Online      int             `json:"online"`
	Offline     int             `json:"offline"`
	NotReady    int             `json:"notReady"`
	Cordoned    int             `json:"cordoned"`
	Sites       []siteCount     `json:"sites"`
	DaemonSets  int             `json:"daemonSets"`
	Healthy     int             `json:"healthy"`
	Progressing int             `json:"progressing"`
	Paused      int             `json:"paused"`
	Failed      int             `json:"failed"`
	Rollouts    []rolloutSample `json:"rollouts"`
}

// siteCount is the nodes of one site.
type siteCount struct {
	Site     string `json:"site"`
	Nodes    int    `json:"nodes"`
	Online   int    `json:"online"`
	Offline  int    `json:"offline"`
	NotReady int    `json:"notReady"`
}

// rolloutSample is where one daemonset's rollout stands.
type rolloutSample struct {
	Key      string `json:"key"`
	State    string `json:"state"`
	Total    int    `json:"total"`
	Updated  int    `json:"updated"`
	Updating int    `json:"updating"`
	Waiting  int    `json:"waiting"`
	Offline  int    `json:"offline"`
	Failed   int    `json:"failed"`
	Complete bool   `json:"complete"`
}

// daemonSet states.
const (
	stateHealthy     = "healthy"
	stateProgressing = "progressing"
	statePaused      = "paused"
	stateFailed      = "failed"
)

// daemonSetState classifies a daemonset: paused (by the operator or a
// gate), failed (failed instances or rolled back), progressing (the
// rollout is not complete or instances are unavailable), else healthy.
func daemonSetState(d *api.DaemonSet) string {
	ro := d.Status.Rollout
	switch {
	case ro != nil && ro.Paused:
		return statePaused
	case ro != nil && (ro.Failed > 0 || ro.RolledBack):
		return stateFailed
	case ro != nil && !ro.Complete, d.Status.NumberUnavailable > 0:
		return stateProgressing
	}
	return stateHealthy
}

func sampleOf(d *api.DaemonSet) rolloutSample {
	s := rolloutSample{Key: d.Key(), State: daemonSetState(d), Total: d.Status.DesiredNumberScheduled,
		Updated: d.Status.UpdatedNumberScheduled, Complete: true}
	if ro := d.Status.Rollout; ro != nil {
		// Nodes waiting for a maintenance window, held by their update
		// lock, or waiting for their download wait too: the counts add up
		// to the total.
		s.Total, s.Updated, s.Updating = ro.Total, ro.Updated, ro.Updating
		s.Waiting = ro.Waiting + ro.WaitingForWindow + ro.HeldByLock + ro.WaitingForPrefetch
		s.Offline, s.Failed, s.Complete = ro.Offline, ro.Failed, ro.Complete
	}
	return s
}

// fleetCounts summarises the fleet, sites by siteLabel.
func fleetCounts(nodes []api.Node, dss []api.DaemonSet, siteLabel string) fleetSummary {
	var f fleetSummary
	sites := map[string]*siteCount{}
	for i := range nodes {
		n := &nodes[i]
		name := n.Labels[siteLabel]
		if name == "" {
			name = "(no " + siteLabel + ")"
		}
		sc := sites[name]
		if sc == nil {
			sc = &siteCount{Site: name}
			sites[name] = sc
		}
		f.Nodes++
		sc.Nodes++
		if n.Online {
			f.Online++
			sc.Online++
		} else {
			f.Offline++
			sc.Offline++
		}
		if readyStatus(n) != "Ready" {
			f.NotReady++
			sc.NotReady++
		}
		if n.Unschedulable {
			f.Cordoned++
		}
	}
	for _, sc := range sites {
		f.Sites = append(f.Sites, *sc)
	}
	slices.SortFunc(f.Sites, func(a, b siteCount) int { return strings.Compare(a.Site, b.Site) })
	for i := range dss {
		s := sampleOf(&dss[i])
		f.DaemonSets++
		switch s.State {
		case stateHealthy:
			f.Healthy++
		case stateProgressing:
			f.Progressing++
		case statePaused:
			f.Paused++
		case stateFailed:
			f.Failed++
		}
		f.Rollouts = append(f.Rollouts, s)
	}
	return f
}

// liveFeed is the latest fleet summary and recent events, for the
// streams; Dashboard.Run publishes to it.
type liveFeed struct {
	mu      sync.Mutex // guards the fields below
	summary *fleetSummary
	events  []api.Event   // newest last, at most liveEventBacklog
	seq     uint64        // newest event seen
	changed chan struct{} // closed and replaced on each publish
	nwatch  int
	kick    chan struct{} // asks Run for a refresh now
}

func newLiveFeed() *liveFeed {
	return &liveFeed{changed: make(chan struct{}), kick: make(chan struct{}, 1)}
}

func (l *liveFeed) publish(s fleetSummary, evs []api.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.summary = &s
	for _, e := range evs {
		if e.Seq > l.seq {
			l.events = append(l.events, e)
			l.seq = e.Seq
		}
	}
	if n := len(l.events) - liveEventBacklog; n > 0 {
		l.events = slices.Delete(l.events, 0, n)
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *liveFeed) lastSeq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

// snapshot returns the summary, the events after seq and a channel closed
// at the next publish.
func (l *liveFeed) snapshot(after uint64) (*fleetSummary, []api.Event, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i, _ := slices.BinarySearchFunc(l.events, after+1, func(e api.Event, seq uint64) int {
		return cmpUint(e.Seq, seq)
	})
	return l.summary, slices.Clone(l.events[i:]), l.changed
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (l *liveFeed) watch(delta int) {
	l.mu.Lock()
	l.nwatch += delta
	l.mu.Unlock()
	if delta > 0 {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

func (l *liveFeed) watchers() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nwatch
}

// eventFilter selects events by object, node and reason (all optional).
type eventFilter struct {
	Object, Node, Reason string
}

func eventFilterOf(r *http.Request) eventFilter {
	q := r.URL.Query()
	return eventFilter{Object: strings.TrimSpace(q.Get("object")), Node: strings.TrimSpace(q.Get("node")),
		Reason: strings.TrimSpace(q.Get("reason"))}
}

func (f eventFilter) matches(e *api.Event) bool {
	return (f.Object == "" || e.Object == f.Object) &&
		(f.Node == "" || e.Source == f.Node || e.Object == "node/"+f.Node) &&
		(f.Reason == "" || strings.EqualFold(e.Reason, f.Reason))
}

// openStream takes a stream slot and starts an SSE response; it answers
// 503 and returns false when MaxStreams are open. release frees the slot.
func (d *Dashboard) openStream(w http.ResponseWriter) (release func(), ok bool) {
	select {
	case d.streams <- struct{}{}:
	default:
		w.Header().Set("Retry-After", "10")
		http.Error(w, fmt.Sprintf("too many live streams open (%d); retry later", cap(d.streams)), http.StatusServiceUnavailable)
		return nil, false
	}
	// The API server's write timeout would cut a stream: each write gets
	// a deadline of its own instead (sseWriter).
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return func() { <-d.streams }, true
}

// sseWriter writes Server-Sent Events, each flushed within a write
// deadline so a client that stops reading is cut.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

const sseWriteTimeout = 30 * time.Second

func newSSEWriter(w http.ResponseWriter) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

// send writes one event; data must hold no newline.
func (s *sseWriter) send(event, data string) error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(sseWriteTimeout))
	var err error
	if event == "" {
		_, err = fmt.Fprintf(s.w, ": %s\n\n", data)
	} else {
		_, err = fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, data)
	}
	if err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sseWriter) sendJSON(event string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.send(event, string(b))
}

// liveStream serves GET /ui/stream: the fleet summary ("counts") on every
// refresh, events after ?since= matching the filter ("event"), and a
// comment every Heartbeat, until the client goes or the dashboard stops.
func (d *Dashboard) liveStream(w http.ResponseWriter, r *http.Request, _ session) {
	since, _ := strconv.ParseUint(r.URL.Query().Get("since"), 10, 64)
	filter := eventFilterOf(r)
	release, ok := d.openStream(w)
	if !ok {
		return
	}
	defer release()
	d.live.watch(1)
	defer d.live.watch(-1)
	sw := newSSEWriter(w)
	if sw.send("", "edgeset live updates") != nil {
		return
	}
	heartbeat := time.NewTicker(d.opts.Heartbeat)
	defer heartbeat.Stop()
	for {
		summary, evs, changed := d.live.snapshot(since)
		if summary != nil && sw.sendJSON("counts", summary) != nil {
			return
		}
		for i := range evs {
			since = evs[i].Seq
			if filter.matches(&evs[i]) && sw.sendJSON("event", eventRowOf(evs[i])) != nil {
				return
			}
		}
		for waiting := true; waiting; {
			select {
			case <-r.Context().Done():
				return
			case <-d.stopped.Done():
				return
			case <-heartbeat.C:
				if sw.send("", "ping") != nil {
					return
				}
			case <-changed:
				waiting = false
			}
		}
	}
}

// maxLogTail bounds the lines a log view asks for before following.
const maxLogTail = 1000

// logStream serves GET /ui/nodes/{name}/logs?ds=NS/NAME&container=&tail=:
// the instance's log, followed, one "line" event per line, then an "end"
// event saying why it ended.
func (d *Dashboard) logStream(w http.ResponseWriter, r *http.Request, _ session) {
	q := r.URL.Query()
	req := api.LogsRequest{DaemonSet: q.Get("ds"), Node: r.PathValue("name"), Container: q.Get("container"), Tail: 100, Follow: true}
	if v := q.Get("tail"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxLogTail {
			http.Error(w, fmt.Sprintf("query parameter tail: %q is not a line count from 0 to %d", v, maxLogTail), http.StatusBadRequest)
			return
		}
		req.Tail = n
	}
	if _, _, ok := strings.Cut(req.DaemonSet, "/"); !ok {
		http.Error(w, "query parameter ds: want NAMESPACE/NAME of a daemonset", http.StatusBadRequest)
		return
	}
	release, ok := d.openStream(w)
	if !ok {
		return
	}
	defer release()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(d.stopped, cancel)()
	sw := newSSEWriter(w)
	sw.sendJSON("end", d.followLog(ctx, sw, req))
}

// followLog sends req's log to sw line by line and returns why it ended.
func (d *Dashboard) followLog(ctx context.Context, sw *sseWriter, req api.LogsRequest) string {
	rc, err := d.b.Logs(ctx, req)
	if err != nil {
		return err.Error()
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if err := sw.sendJSON("line", strings.TrimRight(sc.Text(), "\r")); err != nil {
			return "client gone"
		}
	}
	switch {
	case ctx.Err() != nil:
		return "stopped"
	case sc.Err() != nil:
		return sc.Err().Error()
	}
	return "end of log"
}

// eventRow is an event as the pages show it.
type eventRow struct {
	Seq     uint64 `json:"seq"`
	Time    string `json:"time"`
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Object  string `json:"object"`
	Source  string `json:"source"`
	Message string `json:"message"`
	Count   int32  `json:"count"`
	Warning bool   `json:"warning"`
}

func eventRowOf(e api.Event) eventRow {
	return eventRow{Seq: e.Seq, Time: e.Time.UTC().Format(time.RFC3339), Type: e.Type, Reason: e.Reason, Object: e.Object,
		Source: e.Source, Message: e.Message, Count: max(e.Count, 1), Warning: e.Type == schema.EventWarning}
}
