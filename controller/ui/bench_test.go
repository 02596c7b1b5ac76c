package ui

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkNodesPage renders one page of the node table over 100,000
// nodes from the fake Backend (which copies its node list on every call,
// as the controller builds it): the whole request, through filtering,
// sorting and paging to the HTML. Each sub-benchmark is one kind of
// request, "cached" within NodeCacheAge of the last read of the nodes
// (paging, re-sorting), "uncached" with every request listing the nodes
// again and sorting them (NodeCacheAge 1 ns).
func BenchmarkNodesPage(b *testing.B) {
	const nodes = 100_000
	fake := newFake(nodes, time.Now())
	for _, cache := range []struct {
		name string
		age  time.Duration
	}{{"cached", time.Hour}, {"uncached", time.Nanosecond}} {
		b.Run(cache.name, func(b *testing.B) { benchmarkNodesPage(b, fake, cache.age) })
	}
}

func benchmarkNodesPage(b *testing.B, fake *fakeBackend, age time.Duration) {
	dash := New(fake, Options{Token: testToken, NodeCacheAge: age})
	s := dash.sessions.open("")
	cookie := &http.Cookie{Name: sessionCookie, Value: s.id}
	for _, q := range []string{
		"",                       // first page by name
		"page=1000",              // a page deep in the table
		"sort=lastseen&dir=desc", // a sort of every node
		"selector=site%3Db,role%3Dgateway&sort=status",
		"q=gw-9999",
		"status=offline&size=500",
	} {
		b.Run(fmt.Sprintf("q=%s", q), func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/ui/nodes?"+q, nil)
			req.AddCookie(cookie)
			for b.Loop() {
				rec := httptest.NewRecorder()
				dash.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("GET /ui/nodes?%s = %d", q, rec.Code)
				}
			}
		})
	}
}
