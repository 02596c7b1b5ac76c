package ui

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/edgeset/edgeset/controller/access"
	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/controller/telemetry"
	"github.com/edgeset/edgeset/schema"
)

// pageNames are the templates under templates/, each with layout.html.
var pageNames = []string{"login", "fleet", "nodes", "node", "daemonsets", "daemonset", "events", "error"}

func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{
		"bar":    progressBar,
		"plot":   progressPlot,
		"ibytes": telemetry.Bytes,
		"join":   strings.Join,
		"path":   url.PathEscape,
		// sortBy and pageAt are links to the node table with the filter
		// kept; url.Values encodes them, so they are safe as URLs.
		"sortBy": func(nq nodeQuery, key string) template.URL {
			return template.URL("?" + nq.values(func(c *nodeQuery) { c.Desc = c.Sort == key && !c.Desc; c.Sort = key; c.Page = 1 }))
		},
		"pageAt": func(nq nodeQuery, page int) template.URL {
			return template.URL("?" + nq.values(func(c *nodeQuery) { c.Page = page }))
		},
		"add": func(a, b int) int { return a + b },
	}
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		pages[name] = template.Must(template.New("layout.html").Funcs(funcs).
			ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html"))
	}
	return pages
}

// pageData is what layout.html renders around a page's content.
type pageData struct {
	Title    string
	Nav      string // the nav entry to highlight
	CSRF     string // the session's token for every form; empty signed out
	Stream   string // the live stream URL the page listens to, if any
	Version  string
	Message  string // the outcome of the last action (?msg=)
	Data     any
	SignedIn bool
}

// render writes page name with data, status code; a template failure is
// a 500 with nothing of the page sent.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, code int, name string, s session, data any) {
	d.renderPage(w, r, code, name, pageData{Data: data, CSRF: s.csrf, SignedIn: s.id != ""})
}

func (d *Dashboard) renderPage(w http.ResponseWriter, r *http.Request, code int, name string, p pageData) {
	if p.Title == "" {
		p.Title = name
	}
	if p.SignedIn {
		p.Version = d.b.Version(r.Context()).Version
	}
	p.Message = r.URL.Query().Get("msg")
	var buf bytes.Buffer
	if err := d.pages[name].Execute(&buf, p); err != nil {
		d.opts.Log.Error("dashboard: render page", "page", name, "err", err)
		http.Error(w, "render "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// page serves a view to a signed-in session: h returns the page's data,
// or an error rendered as the error page.
func (d *Dashboard) page(h func(*http.Request, *pageData) error) http.HandlerFunc {
	return d.authed(func(w http.ResponseWriter, r *http.Request, s session) {
		p := pageData{CSRF: s.csrf, SignedIn: true}
		if err := h(r, &p); err != nil {
			d.renderError(w, r, s, err)
			return
		}
		d.renderPage(w, r, http.StatusOK, p.Nav, p)
	})
}

// errorView is the error page's data.
type errorView struct {
	Status  int
	Message string
	Fields  []schema.FieldError
	Back    string
}

// renderError renders err with the status code the API would give it.
func (d *Dashboard) renderError(w http.ResponseWriter, r *http.Request, s session, err error) {
	ev := errorView{Status: http.StatusInternalServerError, Message: err.Error(), Back: "/ui/"}
	if ref := r.Referer(); strings.HasPrefix(ref, originOf(r)+"/ui/") {
		ev.Back = ref // only ever back to a page of this dashboard
	}
	var verr *schema.ValidationError
	var forbidden *access.ForbiddenError
	switch {
	case errors.As(err, &forbidden):
		ev.Status = http.StatusForbidden
	case errors.As(err, &verr):
		ev.Status, ev.Fields = http.StatusUnprocessableEntity, verr.Errors
	case errors.Is(err, api.ErrNotFound):
		ev.Status = http.StatusNotFound
	case errors.Is(err, api.ErrInvalid), errors.Is(err, errBadRequest):
		ev.Status = http.StatusBadRequest
	case errors.Is(err, api.ErrUnavailable):
		ev.Status = http.StatusServiceUnavailable
	}
	d.renderPage(w, r, ev.Status, "error", pageData{Title: "error", CSRF: s.csrf, SignedIn: s.id != "", Data: ev})
}

// errBadRequest marks a dashboard request the dashboard itself refuses.
var errBadRequest = errors.New("bad request")

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBadRequest, fmt.Sprintf(format, args...))
}

// fleetView is the Fleet page.
type fleetView struct {
	Summary   fleetSummary
	SiteLabel string
	Active    []rolloutSample // rollouts not complete, or paused or failed
	Warnings  []eventRow
}

func (d *Dashboard) fleetPage(r *http.Request, p *pageData) error {
	ctx := r.Context()
	snap, err := d.nodes.get(ctx, d.b)
	if err != nil {
		return err
	}
	dss, err := d.b.ListDaemonSets(ctx)
	if err != nil {
		return err
	}
	evs, err := d.b.Events(ctx, api.EventFilter{Limit: 200})
	if err != nil {
		return err
	}
	v := fleetView{Summary: fleetCounts(snap.nodes, dss, d.opts.SiteLabel), SiteLabel: d.opts.SiteLabel}
	for _, s := range v.Summary.Rollouts {
		if s.State != stateHealthy {
			v.Active = append(v.Active, s)
		}
	}
	for i := len(evs) - 1; i >= 0 && len(v.Warnings) < 10; i-- {
		if evs[i].Type == schema.EventWarning {
			v.Warnings = append(v.Warnings, eventRowOf(evs[i]))
		}
	}
	p.Title, p.Nav, p.Data, p.Stream = "Fleet", "fleet", v, "/ui/stream?since="+lastSeqOf(evs)
	return nil
}

func lastSeqOf(evs []api.Event) string {
	if len(evs) == 0 {
		return "0"
	}
	return fmt.Sprint(evs[len(evs)-1].Seq)
}

func (d *Dashboard) nodesPage(r *http.Request, p *pageData) error {
	nq, sel, err := parseNodeQuery(r.URL.Query())
	p.Title, p.Nav = "Nodes", "nodes"
	if err != nil {
		return badRequest("%v", err)
	}
	snap, err := d.nodes.get(r.Context(), d.b)
	if err != nil {
		return err
	}
	p.Data = queryNodes(snap, nq, sel, d.opts.Now())
	return nil
}

// nodeView is the Node page.
type nodeView struct {
	Node      api.Node
	Status    string
	LastSeen  string
	Labels    []keyValue
	Capacity  []keyValue
	Instances []api.Instance
	Placement []api.Placement
	Events    []eventRow
	DrainRef  string
	Telemetry *telemetryView // nil when the agent never reported
}

type keyValue struct{ Key, Value string }

func sortedPairs[V any](m map[string]V, str func(V) string) []keyValue {
	out := make([]keyValue, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, keyValue{k, str(m[k])})
	}
	return out
}

func (d *Dashboard) nodePage(r *http.Request, p *pageData) error {
	name := r.PathValue("name")
	n, err := d.b.GetNode(r.Context(), name)
	if err != nil {
		return err
	}
	evs, err := d.b.Events(r.Context(), api.EventFilter{Object: "node/" + name, Limit: 20})
	if err != nil {
		return err
	}
	v := nodeView{Node: n, Status: nodeStatus(&n), LastSeen: ago(n.LastSeen, d.opts.Now()),
		Labels:    sortedPairs(n.Labels, func(s string) string { return s }),
		Capacity:  sortedPairs(n.Capacity, func(q schema.Quantity) string { return string(q) }),
		Instances: n.Instances, Placement: n.Placement, DrainRef: drainTaintRef,
		Telemetry: telemetryViewOf(n.Telemetry, d.opts.Now())}
	for i := len(evs) - 1; i >= 0; i-- {
		v.Events = append(v.Events, eventRowOf(evs[i]))
	}
	p.Title, p.Nav, p.Data = "Node "+name, "node", v
	p.Stream = "/ui/stream?node=" + url.QueryEscape(name) + "&since=" + lastSeqOf(evs)
	return nil
}

// drainTaintRef is the taint drain adds, as edgesetctl drain does.
const drainTaintRef = schema.TaintNodeUnschedulable + ":" + schema.TaintNoExecute

func (d *Dashboard) daemonSetsPage(r *http.Request, p *pageData) error {
	dss, err := d.b.ListDaemonSets(r.Context())
	if err != nil {
		return err
	}
	rows := make([]daemonSetRow, len(dss))
	for i := range dss {
		rows[i] = daemonSetRow{DS: dss[i], Sample: sampleOf(&dss[i])}
	}
	// The stream's object "-" matches no event: the page takes counts only.
	p.Title, p.Nav, p.Data, p.Stream = "DaemonSets", "daemonsets", rows, "/ui/stream?object=-"
	return nil
}

type daemonSetRow struct {
	DS     api.DaemonSet
	Sample rolloutSample
}

// daemonSetView is the DaemonSet page.
type daemonSetView struct {
	DS        api.DaemonSet
	Sample    rolloutSample
	Batch     int // nodes per batch (maxUnavailable)
	Batches   int
	Done      int // batches done
	Sites     []siteRollout
	SiteLabel string
	History   []progressPoint
	Revisions []api.Revision
	Images    []string
	Events    []eventRow
}

// siteRollout is a daemonset's instances in one site.
type siteRollout struct {
	Site                                                   string
	Instances, Updated, Updating, Waiting, Offline, Failed int
}

func (d *Dashboard) daemonSetPage(r *http.Request, p *pageData) error {
	ctx := r.Context()
	key := r.PathValue("namespace") + "/" + r.PathValue("name")
	ds, err := d.b.GetDaemonSet(ctx, key)
	if err != nil {
		return err
	}
	revs, err := d.b.RolloutHistory(ctx, key)
	if err != nil {
		return err
	}
	snap, err := d.nodes.get(ctx, d.b)
	if err != nil {
		return err
	}
	evs, err := d.b.Events(ctx, api.EventFilter{Object: "daemonset/" + key, Limit: 20})
	if err != nil {
		return err
	}
	v := daemonSetView{DS: ds, Sample: sampleOf(&ds), SiteLabel: d.opts.SiteLabel, History: d.history.get(key), Revisions: revs}
	slices.Reverse(v.Revisions)
	v.Sites = siteBreakdown(&ds, snap.nodes, d.opts.SiteLabel)
	if ro := ds.Status.Rollout; ro != nil {
		v.Batch = max(ro.MaxUnavailable, 1)
		v.Batches = (ro.Total + v.Batch - 1) / v.Batch
		v.Done = ro.Updated / v.Batch
	}
	for _, c := range ds.Manifest.Spec.Template.Spec.Containers {
		v.Images = append(v.Images, c.Image)
	}
	for i := len(evs) - 1; i >= 0; i-- {
		v.Events = append(v.Events, eventRowOf(evs[i]))
	}
	p.Title, p.Nav, p.Data = "DaemonSet "+key, "daemonset", v
	p.Stream = "/ui/stream?object=" + url.QueryEscape("daemonset/"+key) + "&since=" + lastSeqOf(evs)
	return nil
}

// failingPhases are the phases counted as failed.
var failingPhases = []string{schema.PhaseCrashLoopBackOff, schema.PhaseImagePullBackOff, schema.PhaseErrImagePull,
	schema.PhaseFailed, schema.PhaseRefused, schema.PhaseCreateContainerConfigError, schema.PhaseInitError,
	schema.PhaseInitCrashLoopBackOff}

// siteBreakdown counts ds's instances per site of their node.
func siteBreakdown(ds *api.DaemonSet, nodes []api.Node, siteLabel string) []siteRollout {
	siteOf := make(map[string]string, len(ds.Instances))
	for _, in := range ds.Instances {
		siteOf[in.Node] = ""
	}
	for i := range nodes {
		if _, ok := siteOf[nodes[i].Name]; ok {
			siteOf[nodes[i].Name] = nodes[i].Labels[siteLabel]
		}
	}
	bySite := map[string]*siteRollout{}
	for _, in := range ds.Instances {
		name := siteOf[in.Node]
		if name == "" {
			name = "(no " + siteLabel + ")"
		}
		s := bySite[name]
		if s == nil {
			s = &siteRollout{Site: name}
			bySite[name] = s
		}
		s.Instances++
		current := in.Revision == ds.CurrentHash
		switch {
		case !in.Online:
			s.Offline++
		case slices.Contains(failingPhases, in.Phase):
			s.Failed++
		case current && in.Ready:
			s.Updated++
		case current:
			s.Updating++
		default:
			s.Waiting++
		}
	}
	out := make([]siteRollout, 0, len(bySite))
	for _, k := range slices.Sorted(maps.Keys(bySite)) {
		out = append(out, *bySite[k])
	}
	return out
}

// eventsView is the Events page.
type eventsView struct {
	Filter eventFilter
	Events []eventRow
}

// maxEventsShown bounds the events page.
const maxEventsShown = 500

func (d *Dashboard) eventsPage(r *http.Request, p *pageData) error {
	f := eventFilterOf(r)
	evs, err := d.b.Events(r.Context(), api.EventFilter{Object: f.Object, Limit: maxEventsShown})
	if err != nil {
		return err
	}
	v := eventsView{Filter: f}
	for i := len(evs) - 1; i >= 0; i-- {
		if f.matches(&evs[i]) {
			v.Events = append(v.Events, eventRowOf(evs[i]))
		}
	}
	q := url.Values{"since": {lastSeqOf(evs)}}
	for k, val := range map[string]string{"object": f.Object, "node": f.Node, "reason": f.Reason} {
		if val != "" {
			q.Set(k, val)
		}
	}
	p.Title, p.Nav, p.Data, p.Stream = "Events", "events", v, "/ui/stream?"+q.Encode()
	return nil
}

// nodeAction serves POST /ui/nodes/{name}/{action}: label, unlabel,
// taint, untaint, cordon, uncordon, drain.
func (d *Dashboard) nodeAction(w http.ResponseWriter, r *http.Request, s session) {
	name, action := r.PathValue("name"), r.PathValue("action")
	msg, err := d.applyNodeAction(r, name, action)
	if err != nil {
		d.renderError(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/ui/nodes/"+url.PathEscape(name)+"?msg="+url.QueryEscape(msg), http.StatusSeeOther)
}

func (d *Dashboard) applyNodeAction(r *http.Request, name, action string) (string, error) {
	ctx := r.Context()
	form := func(k string) string { return strings.TrimSpace(r.PostFormValue(k)) }
	var patch api.NodePatch
	yes, no := true, false
	switch action {
	case "label":
		if form("key") == "" {
			return "", badRequest("field key: a label key is required")
		}
		value := form("value")
		patch = api.NodePatch{Labels: map[string]*string{form("key"): &value}, Overwrite: r.PostFormValue("overwrite") != ""}
	case "unlabel":
		patch = api.NodePatch{Labels: map[string]*string{form("key"): nil}}
	case "taint":
		patch = api.NodePatch{AddTaints: []schema.Taint{{Key: form("key"), Value: form("value"), Effect: form("effect")}}}
	case "untaint":
		patch = api.NodePatch{RemoveTaints: []string{form("taint")}}
	case "cordon":
		patch = api.NodePatch{Unschedulable: &yes}
	case "uncordon":
		// As edgesetctl uncordon: also end a drain.
		patch = api.NodePatch{Unschedulable: &no}
		if n, err := d.b.GetNode(ctx, name); err == nil && hasTaint(n, drainTaintRef) {
			patch.RemoveTaints = []string{drainTaintRef}
		}
	case "drain":
		// As edgesetctl drain: cordon, then taint unschedulable:NoExecute;
		// the page shows the instances stopping.
		patch = api.NodePatch{Unschedulable: &yes, AddTaints: []schema.Taint{{Key: schema.TaintNodeUnschedulable, Effect: schema.TaintNoExecute}}}
	default:
		return "", fmt.Errorf("%w: node action %q", api.ErrNotFound, action)
	}
	if _, err := d.b.UpdateNode(ctx, name, patch); err != nil {
		return "", err
	}
	d.nodes.invalidate()
	return "node/" + name + " " + pastTense(action), nil
}

func hasTaint(n api.Node, ref string) bool {
	return slices.ContainsFunc(n.Taints, func(t schema.Taint) bool { return t.Key+":"+t.Effect == ref })
}

func pastTense(action string) string {
	switch action {
	case "label", "unlabel":
		return action + "ed"
	case "drain":
		return "drained (its instances stop as the agent acts on it)"
	}
	return action + "ed"
}

// rolloutActions are the actions the DaemonSet page offers.
var rolloutActions = []string{api.RolloutPause, api.RolloutResume, api.RolloutPromote, api.RolloutRestart, api.RolloutUndo, api.RolloutRetry}

// rolloutAction serves POST /ui/daemonsets/{namespace}/{name}/rollout.
func (d *Dashboard) rolloutAction(w http.ResponseWriter, r *http.Request, s session) {
	key := r.PathValue("namespace") + "/" + r.PathValue("name")
	req := api.RolloutRequest{Action: r.PostFormValue("action")}
	if !slices.Contains(rolloutActions, req.Action) {
		d.renderError(w, r, s, badRequest("field action: %q is not one of %s", req.Action, strings.Join(rolloutActions, ", ")))
		return
	}
	if v := r.PostFormValue("toRevision"); v != "" {
		if _, err := fmt.Sscan(v, &req.ToRevision); err != nil || req.ToRevision < 1 {
			d.renderError(w, r, s, badRequest("field toRevision: %q is not a revision number", v))
			return
		}
	}
	if _, err := d.b.Rollout(r.Context(), key, req); err != nil {
		d.renderError(w, r, s, err)
		return
	}
	msg := "daemonset/" + key + ": " + req.Action + " done"
	http.Redirect(w, r, "/ui/daemonsets/"+key+"?msg="+url.QueryEscape(msg), http.StatusSeeOther)
}
