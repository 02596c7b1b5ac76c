package ui

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgeset/edgeset/controller/api"
	"github.com/edgeset/edgeset/schema"
)

// Node table limits.
const (
	defaultPageSize = 50
	maxPageSize     = 500
)

// Node statuses the table filters by.
var nodeStatuses = []string{"ready", "notready", "unknown", "online", "offline", "cordoned"}

// Columns the node table sorts by.
var nodeSortKeys = []string{"name", "status", "online", "lastseen", "agent"}

// nodeQuery is what the node table shows: a filter, an order and a page.
type nodeQuery struct {
	Text     string // substring of the name or of a label key=value
	Selector string // label selector, as edgesetctl -l
	Status   string // one of nodeStatuses, or empty
	Sort     string // one of nodeSortKeys
	Desc     bool
	Page     int // from 1
	Size     int
}

// parseNodeQuery reads a nodeQuery from the URL; a bad parameter is an
// error naming it.
func parseNodeQuery(q url.Values) (nodeQuery, schema.Selector, error) {
	nq := nodeQuery{Text: strings.TrimSpace(q.Get("q")), Selector: strings.TrimSpace(q.Get("selector")),
		Status: q.Get("status"), Sort: q.Get("sort"), Desc: q.Get("dir") == "desc", Page: 1, Size: defaultPageSize}
	if nq.Sort == "" {
		nq.Sort = "name"
	}
	if !slices.Contains(nodeSortKeys, nq.Sort) {
		return nq, nil, fmt.Errorf("query parameter sort: %q is not one of %s", nq.Sort, strings.Join(nodeSortKeys, ", "))
	}
	if nq.Status != "" && !slices.Contains(nodeStatuses, nq.Status) {
		return nq, nil, fmt.Errorf("query parameter status: %q is not one of %s", nq.Status, strings.Join(nodeStatuses, ", "))
	}
	var err error
	if v := q.Get("page"); v != "" {
		if nq.Page, err = strconv.Atoi(v); err != nil || nq.Page < 1 {
			return nq, nil, fmt.Errorf("query parameter page: %q is not a page number (1 or more)", v)
		}
	}
	if v := q.Get("size"); v != "" {
		if nq.Size, err = strconv.Atoi(v); err != nil || nq.Size < 1 || nq.Size > maxPageSize {
			return nq, nil, fmt.Errorf("query parameter size: %q is not a page size from 1 to %d", v, maxPageSize)
		}
	}
	sel, err := schema.ParseSelector(nq.Selector)
	if err != nil {
		return nq, nil, fmt.Errorf("selector %q: %w", nq.Selector, err)
	}
	return nq, sel, nil
}

// values returns the URL query of nq with the changes applied.
func (nq nodeQuery) values(change func(*nodeQuery)) string {
	c := nq
	if change != nil {
		change(&c)
	}
	v := url.Values{}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	set("q", c.Text)
	set("selector", c.Selector)
	set("status", c.Status)
	if c.Sort != "name" {
		set("sort", c.Sort)
	}
	if c.Desc {
		v.Set("dir", "desc")
	}
	if c.Page > 1 {
		v.Set("page", strconv.Itoa(c.Page))
	}
	if c.Size != defaultPageSize {
		v.Set("size", strconv.Itoa(c.Size))
	}
	return v.Encode()
}

// nodeTable is one page of the node table.
type nodeTable struct {
	Query    nodeQuery
	Rows     []nodeRow
	Total    int // nodes in the fleet
	Matched  int // nodes the filter keeps
	Pages    int
	First    int // 1-based index of the first row shown
	Last     int
	Statuses []string
	Sizes    []int
}

// nodeRow is a node as `edgesetctl get nodes -o wide` prints it.
type nodeRow struct {
	Name, Status    string
	Online          bool
	LastSeen        string
	Agent, OSArch   string
	Runtime, Labels string
	Taints          int
}

// queryNodes filters, sorts and pages the nodes of snap for nq; now
// dates the last-seen column. With no filter it only reads the page's rows
// of the snapshot's cached order.
func queryNodes(snap *nodeSnapshot, nq nodeQuery, sel schema.Selector, now time.Time) nodeTable {
	t := nodeTable{Query: nq, Total: len(snap.nodes), Statuses: nodeStatuses, Sizes: []int{25, 50, 100, 200, 500}}
	ordered := snap.sortedBy(nq.Sort)
	at := func(i int) *api.Node {
		if nq.Desc {
			return ordered[len(ordered)-1-i]
		}
		return ordered[i]
	}
	matched := len(ordered)
	text := strings.ToLower(nq.Text)
	if len(sel) > 0 || nq.Status != "" || text != "" {
		kept := make([]*api.Node, 0, 1024)
		for i := range ordered {
			n := at(i)
			if (len(sel) == 0 || sel.Matches(n.Labels)) && statusMatches(n, nq.Status) && textMatches(n, text) {
				kept = append(kept, n)
			}
		}
		matched = len(kept)
		at = func(i int) *api.Node { return kept[i] }
	}
	t.Matched = matched
	t.Pages = max(1, (matched+nq.Size-1)/nq.Size)
	t.Query.Page = min(nq.Page, t.Pages)
	from := (t.Query.Page - 1) * nq.Size
	to := min(from+nq.Size, matched)
	for i := from; i < to; i++ {
		t.Rows = append(t.Rows, rowOf(at(i), now))
	}
	if len(t.Rows) > 0 {
		t.First, t.Last = from+1, to
	}
	return t
}

// nodeSnapshot is one read of the fleet's nodes with its orderings,
// each sorted once, when first asked for. It is never changed otherwise:
// requests share it.
type nodeSnapshot struct {
	nodes []api.Node
	at    time.Time

	mu     sync.Mutex // guards sorted
	sorted map[string][]*api.Node
}

func newNodeSnapshot(nodes []api.Node, at time.Time) *nodeSnapshot {
	return &nodeSnapshot{nodes: nodes, at: at, sorted: map[string][]*api.Node{}}
}

// sortedBy returns the nodes in ascending order of key (then name).
func (s *nodeSnapshot) sortedBy(key string) []*api.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.sorted[key]; ok {
		return o
	}
	o := make([]*api.Node, len(s.nodes))
	for i := range s.nodes {
		o[i] = &s.nodes[i]
	}
	sortNodes(o, key)
	s.sorted[key] = o
	return o
}

// nodeIndex caches the latest nodeSnapshot for maxAge, so that paging
// through 100,000 nodes neither lists nor sorts them on every request
// (listing them alone takes a quarter of a second at that size). A page
// served after maxAge gets the snapshot it has, and the dashboard's Run
// reads a new one for the next (stale): only the first page, a page after
// the dashboard's own node actions (which drop the snapshot) and one
// after staleLimit wait for a listing.
type nodeIndex struct {
	maxAge time.Duration
	now    func() time.Time
	stale  chan struct{} // a page was served an old snapshot

	mu   sync.Mutex // guards snap; held while a new one is read
	snap *nodeSnapshot
}

// staleLimit bounds, in units of maxAge, how old a snapshot a page may
// be served without waiting: with no Run reading new ones, pages read
// their own.
const staleLimit = 10

func newNodeIndex(maxAge time.Duration, now func() time.Time) *nodeIndex {
	return &nodeIndex{maxAge: maxAge, now: now, stale: make(chan struct{}, 1)}
}

// get returns a snapshot for a page: the cached one while it is at most
// maxAge old, an older one (asking Run for a new one) up to staleLimit,
// else a new one.
func (x *nodeIndex) get(ctx context.Context, b Backend) (*nodeSnapshot, error) {
	x.mu.Lock()
	snap := x.snap
	x.mu.Unlock()
	if snap != nil {
		age := x.now().Sub(snap.at)
		if age >= 0 && age < x.maxAge {
			return snap, nil
		}
		if age >= 0 && age < staleLimit*x.maxAge {
			select {
			case x.stale <- struct{}{}:
			default:
			}
			return snap, nil
		}
	}
	return x.fresh(ctx, b)
}

// fresh returns a snapshot at most maxAge old, reading a new one if needed.
func (x *nodeIndex) fresh(ctx context.Context, b Backend) (*nodeSnapshot, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	now := x.now()
	if x.snap != nil && now.Sub(x.snap.at) < x.maxAge && !now.Before(x.snap.at) {
		return x.snap, nil
	}
	nodes, err := b.ListNodes(ctx)
	if err != nil {
		return nil, err
	}
	x.snap = newNodeSnapshot(nodes, now)
	return x.snap, nil
}

// invalidate drops the cached snapshot.
func (x *nodeIndex) invalidate() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.snap = nil
}

func rowOf(n *api.Node, now time.Time) nodeRow {
	return nodeRow{
		Name: n.Name, Status: nodeStatus(n), Online: n.Online, LastSeen: ago(n.LastSeen, now),
		Agent: orNone(n.Info.AgentVersion), OSArch: n.Info.OS + "/" + n.Info.Arch,
		Runtime: orNone(strings.TrimSpace(n.Info.Runtime + " " + n.Info.RuntimeVersion)),
		Taints:  len(n.Taints), Labels: labelString(n.Labels),
	}
}

// readyStatus is a node's Ready condition: Ready, NotReady or Unknown.
func readyStatus(n *api.Node) string {
	if c := n.Condition(schema.NodeReady); c != nil {
		switch c.Status {
		case schema.ConditionTrue:
			return "Ready"
		case schema.ConditionFalse:
			return "NotReady"
		}
	}
	return "Unknown"
}

// nodeStatus renders a node's status as edgesetctl get nodes does.
func nodeStatus(n *api.Node) string {
	s := readyStatus(n)
	if n.Unschedulable {
		s += ",SchedulingDisabled"
	}
	return s
}

func statusMatches(n *api.Node, status string) bool {
	switch status {
	case "":
		return true
	case "ready":
		return readyStatus(n) == "Ready"
	case "notready":
		return readyStatus(n) == "NotReady"
	case "unknown":
		return readyStatus(n) == "Unknown"
	case "online":
		return n.Online
	case "offline":
		return !n.Online
	case "cordoned":
		return n.Unschedulable
	}
	return false
}

// textMatches reports whether text (lower case) is in n's name or in one
// of its labels as key=value. Only a text with "=" needs the pair built.
func textMatches(n *api.Node, text string) bool {
	if text == "" || containsFold(n.Name, text) {
		return true
	}
	pair := strings.Contains(text, "=")
	for k, v := range n.Labels {
		if containsFold(k, text) || containsFold(v, text) || (pair && containsFold(k+"="+v, text)) {
			return true
		}
	}
	return false
}

// containsFold reports whether lower, in lower case, is in s, lowering s
// only when it has an upper-case ASCII letter or non-ASCII byte.
func containsFold(s, lower string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || ('A' <= c && c <= 'Z') {
			return strings.Contains(strings.ToLower(s), lower)
		}
	}
	return strings.Contains(s, lower)
}

// sortNodes orders nodes by key, then by name; ListNodes returns them by
// name already, which the name order checks first.
func sortNodes(nodes []*api.Node, key string) {
	byName := func(a, b *api.Node) int { return strings.Compare(a.Name, b.Name) }
	var cmpFn func(a, b *api.Node) int
	switch key {
	case "status":
		cmpFn = func(a, b *api.Node) int { return cmp.Or(strings.Compare(nodeStatus(a), nodeStatus(b)), byName(a, b)) }
	case "online":
		cmpFn = func(a, b *api.Node) int { return cmp.Or(cmpBool(a.Online, b.Online), byName(a, b)) }
	case "lastseen":
		cmpFn = func(a, b *api.Node) int { return cmp.Or(unixOf(a.LastSeen).Compare(unixOf(b.LastSeen)), byName(a, b)) }
	case "agent":
		cmpFn = func(a, b *api.Node) int {
			return cmp.Or(strings.Compare(a.Info.AgentVersion, b.Info.AgentVersion), byName(a, b))
		}
	default:
		cmpFn = byName
	}
	if !slices.IsSortedFunc(nodes, cmpFn) {
		slices.SortFunc(nodes, cmpFn)
	}
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func unixOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// labelString renders labels as k=v,k=v sorted by key.
func labelString(labels map[string]string) string {
	if len(labels) == 0 {
		return "<none>"
	}
	var b strings.Builder
	for i, k := range slices.Sorted(maps.Keys(labels)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + labels[k])
	}
	return b.String()
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// ago renders how long ago t was ("3m10s ago"), "never" for nil.
func ago(t *time.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "never"
	}
	d := now.Sub(*t)
	switch {
	case d < time.Second:
		return "now"
	case d < time.Hour:
		return d.Round(time.Second).String() + " ago"
	case d < 48*time.Hour:
		return d.Round(time.Minute).String() + " ago"
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}
